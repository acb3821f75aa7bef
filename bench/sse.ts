import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { createRedis, type RedisClient } from '../models/redis-connection.js';
import { CpuMeter, type CpuTotals } from './lib/cpu.js';
import { startIpcChild, type IpcChild } from './lib/ipc-child.js';
import { describeMachine } from './lib/machine.js';
import { deletePrefix } from './lib/redis-cleanup.js';
import { fmt, percentile } from './lib/report.js';
import { report, type Cpu, type Memory, type Phase } from './lib/sse-report.js';
import { GOAL_KB_PER_STREAM, GOAL_P99_MS, GOAL_RATIO, parseSseOptions, type SseOptions } from './lib/sse-options.js';
import { SseClientFleet } from './lib/sse-clients.js';
import { EventPublisher } from './lib/sse-publisher.js';


/**
 * Live run events over SSE at scale: `connections` streams spread evenly over `runs` queued
 * runs on one gateway process, beside a bare node:http SSE fan-out of the same events
 * (bench/servers/bare-sse-server.ts) in the same run. Both servers run from the start, each
 * with its own client process(es) (bench/servers/sse-clients.ts, so client CPU is separate
 * and measured), and keep their streams open to the end:
 *   1. idle memory: RSS and V8 heap after a forced GC, before the streams are opened, 2 s
 *      after they are all open, and once V8's memory reducer has run (both servers settle
 *      at once), as growth per stream;
 *   2. delivery latency, one server at a time: `rate` events/s published for `duration` s
 *      through RunEventLog.append (log + PUBLISH, the gateway's own path), publish -> client
 *      receive;
 *   3. throughput, one server at a time: events published as fast as the clients receive
 *      them (at most `window` frames in flight) for `max-duration` s; frames received per second.
 * Goals (docs/benchmarks.md): p99 <= 100 ms, <= 20 KB RSS per idle stream, gateway frames/s
 * >= 50% of the bare fan-out's.
 */
const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const PROBE = pathToFileURL(path.join(path.dirname(fileURLToPath(import.meta.url)), 'lib', 'memory-probe.ts')).href;

/** A server child the phases measure, its stream URLs and the Redis prefix it listens on. */
interface Target {
  name: string;
  server: IpcChild;
  prefix: string;
  urls: string[];
  headers: Record<string, string>;
}

const serverArgs = ['--expose-gc', '--import', PROBE];

async function memory(server: IpcChild): Promise<Memory> {
  const m = await server.request<Memory>('memory', { gc: true });
  return { rss: m.rss, heapUsed: m.heapUsed, heapTotal: m.heapTotal, external: m.external };
}

/**
 * After a burst of allocation V8 keeps a grown heap (a larger young generation, old-space
 * pages left sparse) until its memory reducer runs, about 8 s after a full GC once the
 * allocation rate is low. Waits (reading, not forcing, GCs) for the committed heap to shrink,
 * up to 20 s, then reads once more after a forced GC: what idle streams cost once settled.
 */
async function settledMemory(side: Side): Promise<Memory & { seconds: number }> {
  const { target, after } = side;
  const t0 = performance.now();
  while (performance.now() - t0 < 20_000) {
    await sleep(500);
    const m = await target.server.request<Memory>('memory', { gc: false });
    if (m.heapTotal < after.heapTotal * 0.95) {
      await sleep(2000); // the reducer may take a few GCs, 0.5 s apart
      break;
    }
  }
  return { ...(await memory(target.server)), seconds: (performance.now() - side.openedAt) / 1000 };
}

async function post<T>(url: string, token: string, body: unknown, expect: number): Promise<T> {
  const res = await fetch(url, { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: JSON.stringify(body) });
  if (res.status !== expect) throw new Error(`POST ${url}: ${res.status} ${await res.text()}`);
  return (await res.json()) as T;
}

/** The real gateway with an account and `runs` queued runs (no worker: they stay queued, followable). */
async function startGateway(o: SseOptions, prefix: string): Promise<{ target: Target; runIds: string[] }> {
  const adminToken = randomBytes(24).toString('hex');
  const env = { PORT: '0', HOST: '127.0.0.1', REDIS_URL, REDIS_PREFIX: prefix, ADMIN_TOKEN: adminToken, LOG_LEVEL: 'warn', RATE_LIMIT_PER_SEC: '0' };
  const server = await startIpcChild('servers/gateway-server.ts', { env, nodeArgs: serverArgs, printsUrl: true, profileDir: o.profileDir });
  try {
    const { api_key: apiKey } = await post<{ api_key: string }>(`${server.url}/v1/admin/accounts`, adminToken, { name: 'bench', credits: 1e12 }, 201);
    const runIds: string[] = [];
    let n = 0;
    const submitter = async () => {
      while (n < o.runs) {
        const i = n++;
        const job = await post<{ run_id: string }>(`${server.url}/v1/jobs`, apiKey, { kind: 'inference:image:generate', input: { prompt: `a lighthouse ${i}` } }, 202);
        runIds[i] = job.run_id;
      }
    };
    await Promise.all(Array.from({ length: 16 }, submitter));
    const urls = runIds.map((id) => `${server.url}/v1/jobs/${id}/events`);
    return { target: { name: 'gateway', server, prefix, urls, headers: { authorization: `Bearer ${apiKey}` } }, runIds };
  } catch (err) {
    await server.stop();
    throw err;
  }
}

async function startBare(o: SseOptions, prefix: string, runIds: string[]): Promise<Target> {
  const server = await startIpcChild('servers/bare-sse-server.ts', { env: { REDIS_URL, REDIS_PREFIX: prefix }, nodeArgs: serverArgs, printsUrl: true, profileDir: o.profileDir });
  return { name: 'bare node:http', server, prefix, urls: runIds.map((id) => `${server.url}/runs/${id}/events`), headers: {} };
}

/** CPU over a window: CpuMeter's counters plus the client processes'. */
async function cpuWindow(meter: CpuMeter, server: IpcChild, clients: SseClientFleet): Promise<() => Promise<Cpu>> {
  const stop = await meter.window(server.pid)();
  const clients0 = clients.cpuUs();
  return async () => {
    const c: CpuTotals = await stop();
    return {
      serverUs: c.serverUs!,
      serverMainThreadUs: c.serverMainThreadUs!,
      clientsUs: clients.cpuUs() - clients0,
      publisherUs: c.parentUs,
      redisUs: c.redisUs,
      redisMainThreadUs: c.redisMainThreadUs,
      busyCores: c.machineBusyUs / c.wallUs,
      seconds: c.wallUs / 1e6,
    };
  };
}

/** Waits until the clients have `target` frames (since their last start), or `ms` passed; returns the count. */
async function drained(clients: SseClientFleet, target: number, ms = 10_000): Promise<number> {
  const until = performance.now() + ms;
  for (;;) {
    const got = await clients.frames();
    if (got >= target || performance.now() > until) return got;
    await sleep(20);
  }
}

/** One server under test with its client process(es), and what was measured of it so far. */
interface Side {
  target: Target;
  clients: SseClientFleet;
  streams: number;
  open: Phase['open'];
  /** performance.now() when the last stream opened. */
  openedAt: number;
  before: Memory;
  after: Memory;
  snapshots: Array<string | undefined>;
}

async function heapSnapshot(o: SseOptions, t: Target): Promise<string | undefined> {
  return o.heapSnapshotDir ? (await t.server.request<{ file: string }>('heap-snapshot', { dir: o.heapSnapshotDir }, 300_000)).file : undefined;
}

/** Memory before, the streams opened, memory 2 s later. */
async function openStreams(o: SseOptions, target: Target, clients: SseClientFleet, log: (m: string) => void): Promise<Side> {
  const before = await memory(target.server);
  const snapshots = [await heapSnapshot(o, target)];
  log(`  opening ${fmt(o.connections)} streams to the ${target.name} server`);
  const opened = await clients.open(target.urls, o.connections, target.headers, o.openConcurrency);
  const ok = opened.statuses['200'] ?? 0;
  if (ok !== o.connections) throw new Error(`${target.name}: ${o.connections - ok} of ${o.connections} streams did not open: ${JSON.stringify(opened.statuses)}`);
  const openedAt = performance.now();
  await sleep(2000); // idle: nothing published yet
  const after = await memory(target.server);
  return { target, clients, streams: ok, open: { seconds: opened.seconds, perSec: ok / opened.seconds }, openedAt, before, after, snapshots };
}

/** The latency window at `rate`, then the throughput window; the memory figures of `side`. */
async function traffic(o: SseOptions, side: Side, settled: Memory & { seconds: number }, runIds: string[], redis: RedisClient, meter: CpuMeter, log: (m: string) => void): Promise<Phase> {
  const { target: t, clients, streams, before, after } = side;
  const streamsPerRun = runIds.map((_, r) => Math.floor(o.connections / o.runs) + (r < o.connections % o.runs ? 1 : 0));
  const pub = new EventPublisher(redis, t.prefix, runIds, streamsPerRun);

  log(`  ${t.name}: latency at ${fmt(o.rate)} events/s for ${o.duration} s after ${o.warmup} s warm-up`);
  await clients.start();
  if (o.warmup > 0) {
    await pub.paced(o.rate, o.warmup);
    await drained(clients, pub.expectedFrames);
  }
  await clients.start();
  let base = pub.expectedFrames;
  const events0 = pub.published;
  const stopLatencyCpu = await cpuWindow(meter, t.server, clients);
  await pub.paced(o.rate, o.duration);
  await pub.settled();
  const latencyFrames = pub.expectedFrames - base;
  const latencyEvents = pub.published - events0;
  await drained(clients, latencyFrames);
  const latencyCpu = await stopLatencyCpu();
  const lat = await clients.collect();
  const sorted = lat.latencies.sort();

  log(`  ${t.name}: throughput, as fast as the clients take it, ${o.maxDuration} s after 1 s ramp`);
  await clients.start();
  base = pub.expectedFrames;
  let running = true;
  const saturating = pub.saturate(async () => base + (await clients.frames()), o.window, () => running);
  await sleep(1000);
  const from = { at: performance.now(), frames: await clients.frames(), published: pub.published };
  const stopMaxCpu = await cpuWindow(meter, t.server, clients);
  await sleep(o.maxDuration * 1000);
  const to = { at: performance.now(), frames: await clients.frames(), published: pub.published };
  const maxCpu = await stopMaxCpu();
  running = false;
  await saturating;
  await pub.settled();
  const maxFrames = await drained(clients, pub.expectedFrames - base);
  const end = await clients.collect();
  const seconds = (to.at - from.at) / 1000;
  const perStreamKb = (a: number, b: number) => (b - a) / streams / 1024;

  return {
    name: t.name,
    streams,
    open: side.open,
    memory: {
      before,
      after,
      rssPerStreamKb: perStreamKb(before.rss, after.rss),
      heapPerStreamKb: perStreamKb(before.heapUsed, after.heapUsed),
      heapTotalPerStreamKb: perStreamKb(before.heapTotal, after.heapTotal),
      settled,
      settledRssPerStreamKb: perStreamKb(before.rss, settled.rss),
      settledHeapTotalPerStreamKb: perStreamKb(before.heapTotal, settled.heapTotal),
      heapSnapshots: side.snapshots.every(Boolean) && side.snapshots.length === 2 ? (side.snapshots as string[]) : undefined,
    },
    latency: {
      rate: o.rate,
      events: latencyEvents,
      frames: lat.frames,
      missing: latencyFrames - lat.frames,
      p50Ms: percentile(sorted, 0.5),
      p90Ms: percentile(sorted, 0.9),
      p99Ms: percentile(sorted, 0.99),
      maxMs: percentile(sorted, 1),
      cpu: latencyCpu,
    },
    max: {
      eventsPerSec: (to.published - from.published) / seconds,
      framesPerSec: (to.frames - from.frames) / seconds,
      seconds,
      missing: pub.expectedFrames - base - maxFrames,
      cpu: maxCpu,
    },
    outOfOrder: lat.outOfOrder + end.outOfOrder,
    closedByServer: end.closedByServer,
    publishErrors: pub.errors,
  };
}

export default async function sse(args: string[]): Promise<number> {
  const o = parseSseOptions(args);
  const prefix = `bench-sse-${randomBytes(4).toString('hex')}`;
  const stoppers: Array<() => Promise<void>> = [];
  const cleanup = async () => {
    for (const stop of stoppers.splice(0).reverse()) await stop().catch(() => {});
    await deletePrefix(REDIS_URL, prefix);
  };
  process.once('SIGINT', () => void cleanup().finally(() => process.exit(130)));
  const log = (msg: string) => o.json || console.error(msg);
  const meter = new CpuMeter(REDIS_URL);
  const redis = createRedis(REDIS_URL, { name: 'bench-publisher', autoPipelining: true });
  stoppers.push(async () => redis.disconnect());

  try {
    const machine = await describeMachine(REDIS_URL);
    const fdLimit = /Max open files\s+(\d+)/.exec(readFileSync('/proc/self/limits', 'utf8'))?.[1];
    // Each server holds one socket per stream; the clients split theirs over their processes.
    if (fdLimit && o.connections + 200 > Number(fdLimit)) throw new Error(`${o.connections} streams need more sockets in each server than the open-files limit of ${fdLimit}`);
    if (fdLimit && Math.ceil(o.connections / o.clientProcesses) + 100 > Number(fdLimit)) {
      throw new Error(`${o.connections} streams in ${o.clientProcesses} client process(es) need more than the open-files limit of ${fdLimit}: raise --client-processes`);
    }
    log(`sse: ${o.connections} streams over ${o.runs} runs; ${o.rate} events/s for ${o.duration} s; max rate for ${o.maxDuration} s; Redis prefix ${prefix}`);
    log('setup: the gateway, an account and the runs; the bare server');
    const { target: gwTarget, runIds } = await startGateway(o, `${prefix}:gw`);
    stoppers.push(() => gwTarget.server.stop());
    const bareTarget = await startBare(o, `${prefix}:bare`, runIds);
    stoppers.push(() => bareTarget.server.stop());
    const targets = [gwTarget, bareTarget];

    // Both servers keep their streams open to the end; the idle one costs the other nothing
    // measurable (no events; the gateway's pings are ~700 writes/s in 250 ms slices).
    log('idle streams');
    const sides: Side[] = [];
    for (const t of targets) {
      const fleet = await SseClientFleet.start(o.clientProcesses);
      stoppers.push(() => fleet.stop());
      sides.push(await openStreams(o, t, fleet, log));
    }
    log('  waiting for V8\'s memory reducer (up to 20 s)');
    const settled = await Promise.all(sides.map(settledMemory));
    for (const s of sides) s.snapshots.push(await heapSnapshot(o, s.target));

    const phases: Phase[] = [];
    for (const [i, s] of sides.entries()) phases.push(await traffic(o, s, settled[i], runIds, redis, meter, log));

    const [g, b] = phases;
    const ratio = g.max.framesPerSec / b.max.framesPerSec;
    const clean = (p: Phase) => p.latency.missing === 0 && p.outOfOrder === 0 && p.closedByServer === 0;
    const goals = { p99: g.latency.p99Ms <= GOAL_P99_MS && clean(g), rss: g.memory.settledRssPerStreamKb <= GOAL_KB_PER_STREAM, ratio: ratio >= GOAL_RATIO };
    if (o.json) {
      console.log(JSON.stringify({ benchmark: 'sse', machine, options: o, phases, ratio, goals }, null, 2));
      return 0;
    }
    console.log(`\nmachine: ${machine.cpus} cores (${machine.cpuModel}), Node ${machine.node}, Redis ${machine.redis}`);
    console.log(report(o, phases, ratio, goals));
    return 0;
  } finally {
    meter.close();
    await cleanup();
  }
}

