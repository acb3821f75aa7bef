import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import { Redis } from 'ioredis';
import path from 'node:path';
import { REDIS_CLI, REDIS_SERVER, findProgram } from '../../test/helpers/optional-program.js';
import { RedisCluster } from '../../test/helpers/redis-cluster.js';
import { startBenchGateway } from './bench-gateway.js';
import { CpuMeter, processCpuUs, type CpuTotals } from './cpu.js';
import { adminPost, Driver, pct } from './job-driver.js';
import { startPrivateRedis } from './private-redis.js';
import { fmt, table } from './report.js';
import { startWorkerFleet } from './worker-fleet.js';

export interface ClusterCycleOptions {
  duration: number;
  warmup: number;
  concurrency: number;
  workers: number;
  slots: number;
  kind: string;
  /** Accounts the load comes from, taking turns: on a cluster each account's runs live in its group's slot. */
  accounts: number;
}

/** One target's closed-loop cycle: jobs, and the Redis CPU it took, per node. */
interface TargetRun {
  name: string;
  jobs: number;
  seconds: number;
  p50Ms: number;
  p99Ms: number;
  gatewayUs: number;
  /**
   * Per Redis node: its role, all threads' CPU and its commands' calls over the window, and its
   * CPU over as long a window with the gateway and workers connected and no job (cron, cluster
   * bus, heartbeats, sweeps): what it costs whatever the load.
   */
  nodes: Array<{ port: number; role: 'primary' | 'replica'; redisUs: number; calls: number; idleUs: number }>;
  /** The primaries' commands over the window, summed: where their time went. */
  commands: CpuTotals['redisCommands'];
}

function sumCommands(totals: CpuTotals[]): CpuTotals['redisCommands'] {
  const sum: CpuTotals['redisCommands'] = {};
  for (const t of totals) for (const [name, c] of Object.entries(t.redisCommands)) sum[name] = { calls: (sum[name]?.calls ?? 0) + c.calls, usec: (sum[name]?.usec ?? 0) + c.usec };
  return sum;
}

const callsOf = (c: CpuTotals) => Object.values(c.redisCommands).reduce((s, x) => s + x.calls, 0);

/** How long each target's nodes are measured idle, after the warm-up and before the load. */
const IDLE_MS = 3_000;

/**
 * `npm run bench -- cycle --cluster`: the gateway's whole job cycle (HTTP submit, SDK workers
 * running the demo engine, succeeded) first on one private redis-server with a replica, then on a private
 * Redis Cluster of 3 primaries and 3 replicas (test/helpers/redis-cluster.ts), with each job queue
 * unsplit and then in 3 partitions (docs/architecture.md, "Queue partitions"), each node
 * without persistence. Per job: Redis CPU on the one server against the cluster's primaries
 * (and, apart, its replicas, which replay every write), and how the primaries share the
 * commands: whether jobs spread across them.
 */
export async function clusterCycle(o: ClusterCycleOptions, log: (msg: string) => void): Promise<number> {
  const server = findProgram(REDIS_SERVER);
  const cli = findProgram(REDIS_CLI);
  if (!server || !cli) {
    console.error(`cycle --cluster needs redis-server and redis-cli: ${REDIS_SERVER.install}; ${REDIS_CLI.install}`);
    return 2;
  }
  const runs: TargetRun[] = [];
  // One server with a replica, as a deployment that survives its loss runs it: a primary pays
  // for feeding its replica on a cluster too.
  const single = await startPrivateRedis(server);
  const replica = await startPrivateRedis(server);
  try {
    log(`the load: ${o.concurrency} callers in a closed loop, from ${o.accounts} account${o.accounts === 1 ? '' : 's'} taking turns (--accounts)`);
    log('target 1/3: one redis-server and its replica');
    const port = Number(new URL(single.url).port);
    const replicaPort = Number(new URL(replica.url).port);
    await replicate(replica.url, port);
    runs.push(await runTarget('one server', o, single.url, {}, [{ port, role: 'primary' }, { port: replicaPort, role: 'replica' }], log, 'bench-cycle'));
  } finally {
    await replica.stop();
    await single.stop();
  }
  const cluster = await RedisCluster.start({ server, cli });
  try {
    const primaries = new Set(await cluster.primaries());
    const nodes = cluster.nodes.map((n) => ({ port: n.port, role: primaries.has(n.port) ? ('primary' as const) : ('replica' as const) }));
    const url = `redis://127.0.0.1:${nodes[0]!.port}`;
    // Each under a prefix of its own: a gateway drains every partition count recorded under its prefix.
    log('target 2/3: a Redis Cluster, 3 primaries and 3 replicas, queues unsplit (QUEUE_PARTITIONS=1)');
    runs.push(await runTarget('cluster, unsplit', o, url, { REDIS_CLUSTER_NODES: cluster.setting, QUEUE_PARTITIONS: '1' }, nodes, log, 'bench-cycle-1'));
    log('target 3/3: the same cluster, queues in 3 partitions (QUEUE_PARTITIONS=3)');
    runs.push(await runTarget('cluster', o, url, { REDIS_CLUSTER_NODES: cluster.setting, QUEUE_PARTITIONS: '3' }, nodes, log, 'bench-cycle-3'));
  } finally {
    await cluster.stop();
  }

  const perJob = (us: number, r: TargetRun) => fmt(us / r.jobs, 1);
  const sumOf = (r: TargetRun, role: 'primary' | 'replica') => r.nodes.filter((n) => n.role === role).reduce((s, n) => s + n.redisUs, 0);
  console.log(
    table(
      ['target', 'jobs', 'jobs/s', 'p50 ms', 'p99 ms', 'gateway µs/job', 'Redis µs/job (primaries)', 'replicas µs/job', 'commands per primary'],
      runs.map((r) => {
        const primaries = r.nodes.filter((n) => n.role === 'primary');
        const calls = primaries.reduce((s, n) => s + n.calls, 0);
        const shares = primaries.map((n) => `${fmt((100 * n.calls) / Math.max(1, calls))}%`).join(' / ');
        return [r.name, fmt(r.jobs), fmt(r.jobs / r.seconds), fmt(r.p50Ms, 2), fmt(r.p99Ms, 2), perJob(r.gatewayUs, r), perJob(sumOf(r, 'primary'), r), perJob(sumOf(r, 'replica'), r), shares];
      }),
    ),
  );
  // Per node: where a cluster's pub/sub costs show (a PUBLISH is broadcast to every node over the
  // bus; an SPUBLISH reaches only its shard's primary and replica).
  for (const r of runs) {
    const of = (role: 'primary' | 'replica') => r.nodes.filter((n) => n.role === role).map((n) => fmt(n.redisUs / r.jobs, 1)).join(' / ');
    console.log(`Redis µs/job per node, ${r.name}: primaries ${of('primary')}; replicas ${of('replica')}`);
  }
  for (const r of runs) {
    const top = Object.entries(r.commands).sort((a, b) => b[1].usec - a[1].usec).slice(0, 8);
    console.log(`Redis commands per job, ${r.name} (execution time only): ${top.map(([n, c]) => `${n} ${fmt(c.usec / r.jobs, 1)} µs (${fmt(c.calls / r.jobs, 2)} calls)`).join(', ')}`);
  }
  // What the load added: each node's CPU less what it took idle over as long (cron, cluster bus,
  // heartbeats and sweeps), a fixed cost per node that a slow run spreads over few jobs.
  const loadOf = (r: TargetRun, role: 'primary' | 'replica') => r.nodes.filter((n) => n.role === role).reduce((s, n) => s + n.redisUs - n.idleUs, 0);
  for (const r of runs) {
    console.log(`Redis µs/job of the load alone (idle subtracted), ${r.name}: primaries ${perJob(loadOf(r, 'primary'), r)}; replicas ${perJob(loadOf(r, 'replica'), r)} (idle: ${r.nodes.map((n) => fmt(n.idleUs / r.seconds / 1000, 1)).join(' / ')} ms of CPU a second per node)`);
  }
  const [one, unsplit, many] = runs as [TargetRun, TargetRun, TargetRun];
  const ratio = sumOf(many, 'primary') / many.jobs / (sumOf(one, 'primary') / one.jobs);
  const loadRatio = loadOf(many, 'primary') / many.jobs / (loadOf(one, 'primary') / one.jobs);
  console.log(`\nRedis CPU per job on the cluster's primaries: ${fmt(ratio, 2)}x the one server's (goal: no worse, <= 1.00x): ${ratio <= 1 ? 'met' : 'NOT met'}; of the load alone: ${fmt(loadRatio, 2)}x`);
  const busiestOf = (r: TargetRun) => Math.max(...r.nodes.filter((n) => n.role === 'primary').map((n) => n.calls)) / Math.max(1, r.nodes.filter((n) => n.role === 'primary').reduce((s, n) => s + n.calls, 0));
  const busiest = busiestOf(many);
  console.log(`jobs spread across the primaries (the busiest takes <= 45% of the commands): ${busiest <= 0.45 ? 'met' : 'NOT met'} (the busiest took ${fmt(100 * busiest)}%; unsplit queues: ${fmt(100 * busiestOf(unsplit))}%)`);
  return 0;
}

/** Makes the server at `url` a replica of the one on `primaryPort` and waits until it is in sync. */
async function replicate(url: string, primaryPort: number): Promise<void> {
  const r = new Redis(url);
  try {
    await r.call('REPLICAOF', '127.0.0.1', String(primaryPort));
    for (let i = 0; !/master_link_status:up/.test(await r.info('replication')); i++) {
      if (i > 200) throw new Error('the replica did not sync within 10 s');
      await new Promise((res) => setTimeout(res, 50));
    }
  } finally {
    r.disconnect();
  }
}

async function runTarget(name: string, o: ClusterCycleOptions, redisUrl: string, env: Record<string, string>, nodes: Array<{ port: number; role: 'primary' | 'replica' }>, log: (msg: string) => void, prefix: string): Promise<TargetRun> {
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'switchyard-bench-cycle-cluster-'));
  const meters = nodes.map((n) => new CpuMeter(`redis://127.0.0.1:${n.port}`));
  const stoppers: Array<() => Promise<void>> = [];
  try {
    const { server: gw, adminToken, apiKey, workerToken } = await startBenchGateway({ redisUrl, prefix, dataDir, env });
    stoppers.push(() => gw.stop());
    const keys = [apiKey];
    while (keys.length < o.accounts) keys.push((await adminPost<{ api_key: string }>(gw, adminToken, '/v1/admin/accounts', { name: `bench-${keys.length}`, credits: 1e12 })).api_key);
    const fleet = await startWorkerFleet({ gateway: gw.url, token: workerToken, workers: o.workers, slots: o.slots });
    stoppers.push(() => fleet.stop());
    const driver = new Driver(gw.url, keys, fleet, (n) => ({ kind: o.kind, input: { prompt: `a lighthouse ${n}` } }));
    const probe = await driver.submit(-1);
    if (!probe) throw new Error('probe submission failed');
    await driver.completion(probe);
    if (o.warmup > 0) await driver.closedLoop(o.warmup, o.concurrency);
    // Redis's counters only: the gateway's CPU is read from its process below.
    const idleStops = await Promise.all(meters.map((m) => m.window()()));
    const idleStart = performance.now();
    await new Promise((resolve) => setTimeout(resolve, IDLE_MS));
    const idleSeconds = (performance.now() - idleStart) / 1000;
    const idle = await Promise.all(idleStops.map((stop) => stop()));
    const stops = await Promise.all(meters.map((m) => m.window()()));
    const gw0 = processCpuUs(gw.pid);
    const r = await driver.closedLoop(o.duration, o.concurrency);
    const gatewayUs = processCpuUs(gw.pid) - gw0;
    const totals = await Promise.all(stops.map((stop) => stop()));
    log(`  ${name}: ${r.jobs} jobs in ${r.seconds.toFixed(1)} s`);
    return {
      name,
      jobs: r.jobs,
      seconds: r.seconds,
      p50Ms: pct(r.latency, 50),
      p99Ms: pct(r.latency, 99),
      gatewayUs,
      nodes: nodes.map((n, i) => ({ ...n, redisUs: totals[i]!.redisUs, calls: callsOf(totals[i]!), idleUs: (idle[i]!.redisUs / idleSeconds) * r.seconds })),
      commands: sumCommands(totals.filter((_, i) => nodes[i]!.role === 'primary')),
    };
  } finally {
    for (const stop of stoppers.reverse()) await stop().catch(() => {});
    for (const m of meters) m.close();
    await rm(dataDir, { recursive: true, force: true });
  }
}
