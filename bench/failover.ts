import { mkdtempSync, rmSync } from 'node:fs';
import { RedisKeys } from '../models/redis/keys.js';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { SwitchyardWorker } from '../sdk/worker/index.js';
import { silentLogger } from '../sdk/worker/logger.js';
import { GatewayProcess } from '../test/helpers/gateway-process.js';
import { ADMIN_TOKEN } from '../test/helpers/harness.js';
import { REDIS_CLI, REDIS_SERVER, findProgram } from '../test/helpers/optional-program.js';
import { RedisCluster } from '../test/helpers/redis-cluster.js';
import { processCpuUs } from './lib/cpu.js';
import { fmt, percentile, table } from './lib/report.js';

/**
 * `npm run bench -- failover`: what a Redis Cluster failover costs callers, with and without
 * REDIS_WAIT_REPLICAS, in one run. Each trial makes a 3+3 cluster of private redis-servers
 * (test/helpers/redis-cluster.ts), one gateway on it and an SDK worker, submits jobs from
 * `--concurrency` callers, SIGKILLs the primary holding the gateway's keys after `--load-s`
 * seconds, and goes on until its replica has taken over. Then every run answered 202 is read
 * back: a 404 is a run the failover lost; the worker counts the runs whose end it was
 * acknowledged twice (a settle the failover lost, run again). Before the kill, the accept's
 * latency and the gateway's CPU per accepted job give the price of waiting for a replica.
 * The baseline is the same trials without REDIS_WAIT_REPLICAS.
 */
const LLM = 'inference:llm:text-generate';

interface Trial {
  accepted: number;
  lost: number;
  stuck: number;
  twice: number;
  unavailable: number;
  latenciesMs: number[];
  cpuUsPerJob: number;
  /** REDIS_WAIT_REPLICAS's accept waits before the kill, by bucket: how long a write is on the primary alone. */
  waitBuckets: Map<number, number>;
  shortfalls: number;
}

/** A histogram's cumulative buckets (upper bound in s -> count) and a counter's total, from the gateway's /metrics. */
async function scrape(url: string): Promise<{ buckets: Map<number, number>; shortfalls: number }> {
  const text = await (await fetch(`${url}/metrics`)).text();
  const buckets = new Map<number, number>();
  let shortfalls = 0;
  for (const line of text.split('\n')) {
    const b = /^switchyard_redis_replica_wait_seconds_bucket\{(.*)\} (\d+)/.exec(line);
    const le = b && b[1].includes('step="accept"') ? /le="([^"]+)"/.exec(b[1])?.[1] : undefined;
    if (b && le) buckets.set(le === '+Inf' ? Infinity : Number(le), Number(b[2]));
    const f = /^switchyard_redis_replica_shortfalls_total\{step="[a-z]+"\} (\d+)/.exec(line);
    if (f) shortfalls += Number(f[1]);
  }
  return { buckets, shortfalls };
}

/** The bucket bound under which a fraction `q` of the waits fell ("≤ 1 ms"), summed over trials. */
function bucketQuantile(trials: Trial[], q: number): string {
  const sum = new Map<number, number>();
  for (const t of trials) for (const [le, n] of t.waitBuckets) sum.set(le, (sum.get(le) ?? 0) + n);
  const total = sum.get(Infinity) ?? 0;
  if (!total) return '-';
  const le = [...sum].sort((a, b) => a[0] - b[0]).find(([, n]) => n >= q * total)![0];
  return le === Infinity ? '> 1 s' : `≤ ${fmt(le * 1000, le < 0.001 ? 1 : 0)} ms`;
}

async function until<T>(what: string, check: () => Promise<T | false | null | undefined>, timeoutMs: number): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await check();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function trial(bins: { server: string; cli: string }, env: Record<string, string>, o: { concurrency: number; loadS: number }): Promise<Trial> {
  const cluster = await RedisCluster.start(bins);
  const dir = mkdtempSync(path.join(os.tmpdir(), 'sy-bench-failover-'));
  const prefix = `bench-fo-${process.pid}-${Date.now()}`;
  const gw = await new GatewayProcess({ REDIS_CLUSTER_NODES: cluster.setting, REDIS_PREFIX: prefix, DATA_DIR: dir, ...env }).start();
  let worker: SwitchyardWorker | undefined;
  try {
    const account = await gw.call('POST', '/v1/admin/accounts', ADMIN_TOKEN, { name: 'bench', credits: 100_000_000 });
    const operator = await gw.call('POST', '/v1/admin/operators', ADMIN_TOKEN, { name: 'bench-op', trust: 'open' });
    const key: string = account.body.api_key;
    const acked = new Map<string, number>();
    worker = new SwitchyardWorker({
      gateway: gw.url, token: operator.body.worker_token, kinds: [LLM], slots: 16, logger: silentLogger,
      handler: async () => ({ artifacts: [], extra: { text: 'ok' }, usage: { input_tokens: 1, output_tokens: 1 } }),
    });
    worker.on('completed', (lease) => acked.set(lease.run_id, (acked.get(lease.run_id) ?? 0) + 1));
    await worker.start();

    const accepted: string[] = [];
    const latenciesMs: number[] = [];
    let unavailable = 0;
    let beforeKill = true;
    let submitting = true;
    const submitter = async () => {
      while (submitting) {
        const t0 = performance.now();
        const res = await gw.call('POST', '/v1/jobs', key, { kind: LLM, input: { prompt: 'hi' } }).catch(() => ({ status: 0, body: null }));
        if (res.status === 202) {
          accepted.push(res.body.run_id);
          if (beforeKill) latenciesMs.push(performance.now() - t0);
        } else unavailable++;
      }
    };
    const cpu0 = processCpuUs(gw.child.pid!);
    const load = Promise.all(Array.from({ length: o.concurrency }, submitter));
    await new Promise((r) => setTimeout(r, o.loadS * 1000));
    const cpuUsPerJob = (processCpuUs(gw.child.pid!) - cpu0) / Math.max(1, accepted.length);
    beforeKill = false;
    const { buckets: waitBuckets } = await scrape(gw.url);
    // The primary holding the runs: their account's group's slot (models/redis/keys.ts).
    const runsKey = new RedisKeys(`{${prefix}}`).account(account.body.account.id);
    const primary = await cluster.primaryOf(runsKey);
    await cluster.kill(primary);
    const survivor = cluster.nodes.find((n) => n.port !== primary)!.port;
    await cluster.until(async () => (await cluster.liveOk()) && (await cluster.primaryOf(runsKey, survivor)) !== primary, 'the failover', 60_000);
    const atFailover = accepted.length;
    await until('accepts after the failover', async () => accepted.length >= atFailover + o.concurrency, 60_000);
    submitting = false;
    await load;

    // Each accepted run must end (a lease the failover took ends when its lock lapses) or be missing.
    let lost = 0;
    let stuck = 0;
    const deadline = Date.now() + 90_000;
    for (const runId of accepted) {
      const end = await until(`${runId}'s end`, async () => {
        const res = await gw.call('GET', `/v1/jobs/${runId}`, key);
        if (res.status === 404) return 'lost';
        return res.status === 200 && res.body.terminal && 'ended';
      }, Math.max(0, deadline - Date.now())).catch(() => 'stuck');
      if (end === 'lost') lost++;
      if (end === 'stuck') stuck++;
    }
    const twice = [...acked.values()].filter((n) => n > 1).length;
    const { shortfalls } = await scrape(gw.url);
    return { accepted: accepted.length, lost, stuck, twice, unavailable, latenciesMs, cpuUsPerJob, waitBuckets, shortfalls };
  } finally {
    await worker?.stop({ timeoutMs: 0 });
    await gw.kill();
    await cluster.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

export default async function failover(args: string[]): Promise<number> {
  const { values } = parseArgs({ args, options: { trials: { type: 'string', default: '3' }, concurrency: { type: 'string', default: '8' }, 'load-s': { type: 'string', default: '3' }, 'timeout-ms': { type: 'string', default: '1000' } } });
  const bins = { server: findProgram(REDIS_SERVER), cli: findProgram(REDIS_CLI) };
  if (!bins.server || !bins.cli) {
    console.error(`failover needs redis-server and redis-cli: ${REDIS_SERVER.install}; ${REDIS_CLI.install}`);
    return 2;
  }
  const o = { concurrency: Number(values.concurrency), loadS: Number(values['load-s']) };
  const modes: Array<{ name: string; env: Record<string, string> }> = [
    { name: 'baseline: no wait', env: {} },
    { name: 'REDIS_WAIT_REPLICAS=1', env: { REDIS_WAIT_REPLICAS: '1', REDIS_WAIT_TIMEOUT_MS: String(values['timeout-ms']) } },
  ];
  // Trials alternate between the modes, so a warming machine favours neither.
  const results = new Map<string, Trial[]>(modes.map((m) => [m.name, []]));
  for (let i = 0; i < Number(values.trials); i++) {
    for (const mode of modes) {
      results.get(mode.name)!.push(await trial(bins as { server: string; cli: string }, mode.env, o));
      console.error(`${mode.name}: trial ${i + 1} done`);
    }
  }
  const rows = modes.map(({ name }) => {
    const trials = results.get(name)!;
    const sum = (f: (t: Trial) => number) => trials.reduce((s, t) => s + f(t), 0);
    const lat = trials.flatMap((t) => t.latenciesMs).sort((a, b) => a - b);
    return [name, fmt(trials.length), fmt(sum((t) => t.accepted)), fmt(sum((t) => t.lost)), fmt(sum((t) => t.twice)), fmt(sum((t) => t.stuck)), fmt(sum((t) => t.unavailable)), fmt(percentile(lat, 0.5), 2), fmt(percentile(lat, 0.99), 2), fmt(sum((t) => t.cpuUsPerJob) / trials.length), bucketQuantile(trials, 0.5), bucketQuantile(trials, 0.99), fmt(sum((t) => t.shortfalls))];
  });
  console.log(table(['mode', 'kills', 'accepted', 'lost', 'ended twice', 'unended at 90 s', '503s', 'accept p50 ms', 'accept p99 ms', 'gateway CPU µs/job', 'replica wait p50', 'p99', 'shortfalls'], rows));
  return 0;
}
