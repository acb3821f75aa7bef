import { execSync } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import { Redis } from 'ioredis';
import { processCpuUs } from './lib/cpu.js';
import { FleetGateways, type LoopFigures } from './lib/fleet-gateways.js';
import { FleetSims } from './lib/fleet-sims.js';
import { describeMachine } from './lib/machine.js';
import { startPrivateRedis } from './lib/private-redis.js';
import { fmt, percentile, table } from './lib/report.js';

/**
 * A large fleet of idle workers on `--gateways` gateway instances, measured beside a small one
 * (`--baseline` workers) in the same run (docs/benchmarks.md, "Fleet"):
 *   - gateway RSS per connected worker (after full GCs, over the instances' RSS with no worker);
 *   - Redis commands per second per idle worker, over an idle window (total_commands_processed
 *     of a private redis-server that serves these gateways only), and gateway CPU per worker;
 *   - registration rate: workers connected at `--in-flight` registrations at a time;
 *   - dispatch latency (submit sent -> lease received) at `--rate` jobs/s with the fleet connected;
 *   - a reconnect storm: every gateway SIGKILLed and started again on its port; the time until
 *     every worker is registered again, and Redis's peak command rate and CPU meanwhile.
 * The simulated workers (bench/servers/raw-fleet.ts) are bare `ws` clients in `--processes`
 * children, reconnecting with the SDK's own backoff. Each open socket is a file descriptor in a
 * gateway and in a worker process: `ulimit -n` must exceed the workers per process (checked).
 * Goals: <= 30 KB RSS per idle worker, <= 0.3 Redis commands/s per idle worker, dispatch p99
 * <= 15 ms with the fleet connected, every worker registered again within 60 s of a restart.
 */
const RSS_GOAL_KB = 30;
const REDIS_GOAL = 0.3;
const P99_GOAL_MS = 15;
const STORM_GOAL_S = 60;
const KIND = 'inference:image:generate';

interface FleetOptions {
  workers: number;
  baseline: number;
  gateways: number;
  processes: number;
  idle: number;
  rate: number;
  dispatch: number;
  inFlight: number;
  storm: boolean;
  json: boolean;
  /** Given to each gateway's Node (`--gateway-node-args "--max-semi-space-size=32"`). */
  gatewayNodeArgs: string[];
}

function parseFleetOptions(args: string[]): FleetOptions {
  const { values } = parseArgs({
    args,
    options: {
      workers: { type: 'string', default: '10000' },
      baseline: { type: 'string', default: '100' },
      gateways: { type: 'string', default: '2' },
      processes: { type: 'string', default: '2' },
      idle: { type: 'string', default: '30' },
      rate: { type: 'string', default: '20' },
      dispatch: { type: 'string', default: '10' },
      'in-flight': { type: 'string', default: '200' },
      'no-storm': { type: 'boolean', default: false },
      'gateway-node-args': { type: 'string', default: '' },
      json: { type: 'boolean', default: false },
    },
  });
  const num = (name: string, text: string, min: number) => {
    const n = Number(text);
    if (text.trim() === '' || !Number.isFinite(n) || n < min) throw new Error(`--${name} must be a number >= ${min} (got ${JSON.stringify(text)})`);
    return n;
  };
  const o = {
    workers: Math.round(num('workers', values.workers, 1)),
    baseline: Math.round(num('baseline', values.baseline, 1)),
    gateways: Math.round(num('gateways', values.gateways, 1)),
    processes: Math.round(num('processes', values.processes, 1)),
    idle: num('idle', values.idle, 5),
    rate: num('rate', values.rate, 1),
    dispatch: num('dispatch', values.dispatch, 1),
    inFlight: Math.round(num('in-flight', values['in-flight'], 1)),
    storm: !values['no-storm'],
    json: values.json,
    gatewayNodeArgs: values['gateway-node-args'].split(' ').filter(Boolean),
  };
  if (o.baseline >= o.workers) throw new Error('--baseline must be smaller than --workers');
  return o;
}

/** The figures of one fleet size. */
interface FleetRow {
  name: string;
  workers: number;
  /** Workers per second while connecting this size (from the previous one). */
  registrationsPerSec: number;
  rssKbPerWorker: number;
  redisCmdsPerSec: number;
  redisCmdsPerWorkerSec: number;
  /** Over the gateways' own rate with no worker connected. */
  redisCmdsPerWorkerSecAboveFloor: number;
  topCommands: Array<{ name: string; perSec: number }>;
  gatewayCpuUsPerWorkerSec: number;
  redisCpuPct: number;
  /** Redis used_memory over the floor's, per worker (fleet counts: each identity's share and name). */
  redisBytesPerWorker: number;
  dispatchP50Ms: number;
  dispatchP99Ms: number;
  dispatchMaxMs: number;
  jobs: number;
  missingLeases: number;
  /** The gateways' event loops during the dispatch phase (the worse instance's figures). */
  loop: LoopFigures;
  /** The worker processes' event-loop delay then (the worst). */
  simLoop: { p99Ms: number; maxMs: number };
  /** The machine's 1-minute load average at the end of the dispatch phase. */
  load: number;
}

interface Storm {
  workers: number;
  /** SIGKILL -> every instance listening again. */
  restartS: number;
  /** What the instances' start-up sent Redis (not counted in the rates below). */
  startupRedisCmds: number;
  /** SIGKILL -> every worker registered again. */
  allRegisteredS: number;
  /** Listening -> every worker registered again; and -> half, 90%, 99% of them. */
  afterListeningS: number;
  halfS: number;
  ninetyS: number;
  ninetyNineS: number;
  /** The highest rate over a 250 ms sample. */
  peakRegistrationsPerSec: number;
  peakRedisCmdsPerSec: number;
  peakTop: Array<{ name: string; perSec: number }>;
  meanRedisCmdsPerSec: number;
  /** Redis commands from listening to the last registration, per worker registered. */
  redisCmdsPerRegistration: number;
  redisCpuPct: number;
  peakRedisCpuPct: number;
  redisMaxClients: number;
}

async function redisCounters(redis: Redis) {
  const info = await redis.info('stats', 'cpu', 'clients', 'memory', 'commandstats');
  const field = (k: string) => Number(new RegExp(`^${k}:(\\S+)`, 'm').exec(info)?.[1]);
  const commands: Record<string, number> = {};
  for (const [, name, calls] of info.matchAll(/^cmdstat_(\S+?):calls=(\d+)/gm)) commands[name] = Number(calls);
  return { total: field('total_commands_processed'), cpuUs: (field('used_cpu_user') + field('used_cpu_sys')) * 1e6, clients: field('connected_clients'), usedMemory: field('used_memory'), commands };
}

/** Idle window: Redis commands and CPU, gateway CPU; `dt` seconds. */
async function idleWindow(redis: Redis, gateways: FleetGateways, seconds: number) {
  const cpu0 = gateways.pids.map(processCpuUs);
  const a = await redisCounters(redis);
  const t0 = performance.now();
  await sleep(seconds * 1000);
  const b = await redisCounters(redis);
  const dt = (performance.now() - t0) / 1000;
  const gatewayUs = gateways.pids.map(processCpuUs).reduce((s, v, i) => s + v - cpu0[i], 0);
  // Minus this window's own INFO.
  const cmds = (b.total - a.total - 1) / dt;
  const topCommands = Object.entries(b.commands)
    .map(([name, calls]) => ({ name, perSec: (calls - (a.commands[name] ?? 0)) / dt }))
    .filter((c) => c.name !== 'info' && c.perSec > 0)
    .sort((x, y) => y.perSec - x.perSec)
    .slice(0, 6);
  return { cmds, topCommands, gatewayUsPerSec: gatewayUs / dt, redisCpuPct: ((b.cpuUs - a.cpuUs) / (dt * 1e6)) * 100, usedMemory: b.usedMemory };
}

/** Open loop at `rate` for `seconds`, submissions spread over the instances; submit -> lease. */
async function dispatch(gateways: FleetGateways, sims: FleetSims, rate: number, seconds: number) {
  await sims.leases(); // forget any earlier ones
  await gateways.loopStart();
  await sims.loop();
  const total = Math.round(rate * seconds);
  const sent = new Map<string, number>();
  const sends: Array<Promise<void>> = [];
  const t0 = performance.now();
  for (let i = 0; i < total; i++) {
    const wait = t0 + (i * 1000) / rate - performance.now();
    if (wait > 0) await sleep(wait);
    const sentAt = performance.timeOrigin + performance.now();
    const url = gateways.urls[i % gateways.urls.length];
    sends.push(
      fetch(`${url}/v1/jobs`, { method: 'POST', headers: { authorization: `Bearer ${gateways.apiKey}`, 'content-type': 'application/json' }, body: JSON.stringify({ kind: KIND, input: { prompt: `a lighthouse ${i}` } }) })
        .then(async (res) => {
          const body = (await res.json()) as { run_id?: string };
          if (res.status === 202 && body.run_id) sent.set(body.run_id, sentAt);
        })
        .catch(() => {}),
    );
  }
  await Promise.all(sends);
  const loop = await gateways.loopStop();
  const simLoop = await sims.loop();
  // The machine's run queue: on a shared machine, how much else wanted a core meanwhile.
  const load = os.loadavg()[0];
  const leases = new Map<string, number>();
  for (let waited = 0; waited < 10_000; waited += 250) {
    for (const [id, at] of await sims.leases()) leases.set(id, at);
    if ([...sent.keys()].every((id) => leases.has(id))) break;
    await sleep(250);
  }
  const ms = [...sent].filter(([id]) => leases.has(id)).map(([id, at]) => leases.get(id)! - at).sort((x, y) => x - y);
  return { jobs: sent.size, missing: sent.size - ms.length, p50: percentile(ms, 0.5), p99: percentile(ms, 0.99), max: ms.at(-1) ?? NaN, loop, simLoop, load };
}

async function measureSize(name: string, o: FleetOptions, ctx: { redis: Redis; gateways: FleetGateways; sims: FleetSims; floorRss: number[]; floorCmds: number; floorMemory: number }, from: number, to: number, log: (m: string) => void): Promise<FleetRow> {
  const { redis, gateways, sims } = ctx;
  log(`${name}: connecting workers ${from}..${to - 1} (${o.inFlight} registrations in flight)`);
  const c = await sims.connect({ gateways: gateways.urls, token: gateways.workerToken, kind: KIND, from, count: to - from, inFlight: o.inFlight });
  if (c.refusals) log(`  ${c.refusals} registrations refused on the way`);
  // Let the attach bursts' writes and the first fills settle before anything is read.
  await sleep(5_000);
  log(`  idle window ${o.idle} s`);
  const idle = await idleWindow(redis, gateways, o.idle);
  // Read after the idle window, as the floor is: V8 has had time to shrink what the connect burst grew.
  const rss = await gateways.rss();
  const rssKbPerWorker = rss.reduce((s, r, i) => s + r - ctx.floorRss[i], 0) / 1024 / to;
  log(`  dispatch at ${o.rate} jobs/s for ${o.dispatch} s`);
  const d = await dispatch(gateways, sims, o.rate, o.dispatch);
  return {
    name,
    workers: to,
    registrationsPerSec: (to - from) / (c.ms / 1000),
    rssKbPerWorker,
    redisCmdsPerSec: idle.cmds,
    redisCmdsPerWorkerSec: idle.cmds / to,
    redisCmdsPerWorkerSecAboveFloor: (idle.cmds - ctx.floorCmds) / to,
    topCommands: idle.topCommands,
    gatewayCpuUsPerWorkerSec: idle.gatewayUsPerSec / to,
    redisCpuPct: idle.redisCpuPct,
    redisBytesPerWorker: (idle.usedMemory - ctx.floorMemory) / to,
    dispatchP50Ms: d.p50,
    dispatchP99Ms: d.p99,
    dispatchMaxMs: d.max,
    jobs: d.jobs,
    missingLeases: d.missing,
    loop: d.loop,
    simLoop: d.simLoop,
    load: d.load,
  };
}

/** Every instance SIGKILLed and started again on its port; until the whole fleet is registered again. */
async function storm(redis: Redis, gateways: FleetGateways, sims: FleetSims, workers: number, log: (m: string) => void): Promise<Storm> {
  log(`storm: SIGKILL every gateway, start them again, wait for ${workers} workers`);
  const t0 = performance.now();
  await gateways.killAll();
  const down = await redisCounters(redis);
  await gateways.startAll();
  const listening = performance.now();
  // Measured from here: what the instances' own start-up sends Redis is not the storm's.
  const a = await redisCounters(redis);
  let last = a;
  let lastAt = performance.now();
  let peak = { cmds: 0, cpuPct: 0, registrations: 0, top: [] as Array<{ name: string; perSec: number }> };
  let maxClients = a.clients;
  let registered = 0;
  let before = (await sims.status()).registered;
  const reached: Record<number, number> = {};
  while (performance.now() - t0 < 180_000) {
    await sleep(250);
    const [st, r] = await Promise.all([sims.status(), redisCounters(redis)]);
    const at = performance.now();
    const secs = (at - lastAt) / 1000;
    const cmds = (r.total - last.total) / secs;
    if (cmds > peak.cmds) {
      const top = Object.entries(r.commands)
        .map(([name, calls]) => ({ name, perSec: (calls - (last.commands[name] ?? 0)) / secs }))
        .filter((c) => c.perSec > 0)
        .sort((x, y) => y.perSec - x.perSec)
        .slice(0, 5);
      peak = { ...peak, cmds, top };
    }
    peak.cpuPct = Math.max(peak.cpuPct, ((r.cpuUs - last.cpuUs) / (secs * 1e6)) * 100);
    peak.registrations = Math.max(peak.registrations, (st.registered - before) / secs);
    maxClients = Math.max(maxClients, r.clients);
    last = r;
    lastAt = at;
    before = registered = st.registered;
    for (const q of [0.5, 0.9, 0.99]) if (reached[q] === undefined && registered >= q * workers) reached[q] = (at - listening) / 1000;
    if (registered >= workers) break;
  }
  const done = performance.now();
  if (registered < workers) log(`  only ${registered} of ${workers} registered again within 180 s`);
  const dt = (done - listening) / 1000;
  return {
    workers,
    restartS: (listening - t0) / 1000,
    startupRedisCmds: a.total - down.total,
    allRegisteredS: registered >= workers ? (done - t0) / 1000 : NaN,
    afterListeningS: registered >= workers ? dt : NaN,
    halfS: reached[0.5] ?? NaN,
    ninetyS: reached[0.9] ?? NaN,
    ninetyNineS: reached[0.99] ?? NaN,
    peakRegistrationsPerSec: peak.registrations,
    peakRedisCmdsPerSec: peak.cmds,
    peakTop: peak.top,
    meanRedisCmdsPerSec: (last.total - a.total) / dt,
    redisCmdsPerRegistration: (last.total - a.total) / workers,
    redisCpuPct: ((last.cpuUs - a.cpuUs) / (dt * 1e6)) * 100,
    peakRedisCpuPct: peak.cpuPct,
    redisMaxClients: maxClients,
  };
}

export default async function fleet(args: string[]): Promise<number> {
  const o = parseFleetOptions(args);
  const log = (m: string) => o.json || console.error(m);
  const perProcess = Math.ceil(o.workers / Math.min(o.processes, o.gateways));
  // The children inherit this process's limit; Node has no getrlimit, so ask the shell.
  const nofile = Number(execSync('ulimit -n', { shell: '/bin/sh', encoding: 'utf8' }).trim());
  if (Number.isFinite(nofile) && nofile < perProcess + 1000) {
    console.error(`fleet: ulimit -n is ${nofile}: each gateway and worker process holds up to ${perProcess} sockets; run \`ulimit -n ${perProcess * 2 + 1000}\` first, or pass fewer --workers`);
    return 2;
  }
  const stoppers: Array<() => Promise<void>> = [];
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'switchyard-bench-fleet-'));
  const cleanup = async () => {
    for (const stop of stoppers.splice(0).reverse()) await stop().catch(() => {});
    await rm(dataDir, { recursive: true, force: true });
  };
  // Ctrl-C stops the children (gateways, worker processes, the private Redis) too.
  process.once('SIGINT', () => void cleanup().finally(() => process.exit(130)));
  try {
    const privateRedis = await startPrivateRedis();
    stoppers.push(() => privateRedis.stop());
    const redis = new Redis(privateRedis.url);
    stoppers.push(async () => redis.disconnect());
    const machine = await describeMachine(privateRedis.url);
    log(`fleet: ${o.baseline} then ${o.workers} idle workers on ${o.gateways} gateways, ${o.processes} worker processes; private Redis ${privateRedis.url}`);
    const gateways = await FleetGateways.start(o.gateways, privateRedis.url, 'bench-fleet', dataDir, o.gatewayNodeArgs);
    stoppers.push(() => gateways.stop());
    const sims = await FleetSims.start(o.processes);
    stoppers.push(() => sims.stop());

    log(`no worker: idle window ${o.idle} s`);
    const floor = await idleWindow(redis, gateways, o.idle);
    const floorRss = await gateways.rss();
    const ctx = { redis, gateways, sims, floorRss, floorCmds: floor.cmds, floorMemory: floor.usedMemory };
    const rows = [await measureSize('baseline', o, ctx, 0, o.baseline, log), await measureSize('fleet', o, ctx, o.baseline, o.workers, log)];
    const s = o.storm ? await storm(redis, gateways, sims, o.workers, log) : null;

    const [, big] = rows;
    const goals = {
      rssKbPerWorkerAtMost: RSS_GOAL_KB,
      rssMet: big.rssKbPerWorker <= RSS_GOAL_KB,
      redisCmdsPerWorkerSecAtMost: REDIS_GOAL,
      redisMet: big.redisCmdsPerWorkerSec <= REDIS_GOAL,
      dispatchP99AtMostMs: P99_GOAL_MS,
      dispatchMet: big.dispatchP99Ms <= P99_GOAL_MS && big.missingLeases === 0,
      stormAtMostS: STORM_GOAL_S,
      stormMet: s === null ? null : s.allRegisteredS <= STORM_GOAL_S,
    };
    if (o.json) {
      console.log(JSON.stringify({ benchmark: 'fleet', machine, options: o, floor: { rss: floorRss, redisCmdsPerSec: floor.cmds, topCommands: floor.topCommands }, rows, storm: s, goals }, null, 2));
      return 0;
    }
    console.log(`\nmachine: ${machine.cpus} cores (${machine.cpuModel}), Node ${machine.node}, Redis ${machine.redis}`);
    console.log(`${o.gateways} gateways; with no worker: RSS ${floorRss.map((r) => `${fmt(r / 2 ** 20)} MB`).join(', ')}, ${fmt(floor.cmds, 1)} Redis commands/s (${floor.topCommands.map((c) => `${c.name} ${fmt(c.perSec, 1)}`).join(', ')})`);
    const d = (v: number, k = 2) => (Number.isFinite(v) ? fmt(v, k) : '-');
    console.log(
      table(
        ['fleet', 'workers', 'registered/s', 'RSS KB/worker', 'Redis cmd/s', 'cmd/s/worker', 'above floor', 'gw CPU µs/s/worker', 'Redis CPU %', 'Redis B/worker', 'dispatch p50', 'p99 ms', 'max ms', 'jobs', 'no lease'],
        rows.map((r) => [r.name, fmt(r.workers), fmt(r.registrationsPerSec), d(r.rssKbPerWorker, 1), fmt(r.redisCmdsPerSec, 1), d(r.redisCmdsPerWorkerSec, 4), d(r.redisCmdsPerWorkerSecAboveFloor, 4), d(r.gatewayCpuUsPerWorkerSec, 1), d(r.redisCpuPct, 1), fmt(r.redisBytesPerWorker), d(r.dispatchP50Ms), d(r.dispatchP99Ms), d(r.dispatchMaxMs), fmt(r.jobs), fmt(r.missingLeases)]),
      ),
    );
    for (const r of rows) console.log(`Redis commands/s while idle, ${r.name}: ${r.topCommands.map((c) => `${c.name} ${fmt(c.perSec, 1)}`).join(', ')}`);
    for (const r of rows) {
      const l = r.loop;
      console.log(
        `during dispatch, ${r.name}: gateway event-loop delay p99 ${d(l.delayP99Ms)} ms, max ${d(l.delayMaxMs)} ms; ${fmt(l.gcCount)} GC pauses (${fmt(l.gcMarkCompacts)} mark-compact), ${d(l.gcTotalMs, 1)} ms in all, longest ${d(l.gcMaxMs, 1)} ms (${l.gcMaxKind}); ` +
          `worker processes' delay p99 ${d(r.simLoop.p99Ms)} ms, max ${d(r.simLoop.maxMs)} ms; load average ${d(r.load)} on ${os.availableParallelism()} cores`,
      );
    }
    const met = (b: boolean | null) => (b === null ? 'not measured' : b ? 'met' : 'NOT met');
    console.log(`\nRSS per idle worker: ${d(big.rssKbPerWorker, 1)} KB  goal <= ${RSS_GOAL_KB} KB: ${met(goals.rssMet)}`);
    console.log(`Redis commands/s per idle worker: ${d(big.redisCmdsPerWorkerSec, 4)}  goal <= ${REDIS_GOAL}: ${met(goals.redisMet)}`);
    console.log(`dispatch p99 with ${fmt(big.workers)} connected: ${d(big.dispatchP99Ms)} ms (baseline ${d(rows[0].dispatchP99Ms)} ms with ${fmt(rows[0].workers)})  goal <= ${P99_GOAL_MS} ms: ${met(goals.dispatchMet)}`);
    if (s)
      console.log(
        `reconnect storm: ${fmt(s.workers)} workers registered again ${d(s.allRegisteredS, 1)} s after the SIGKILL  goal <= ${STORM_GOAL_S} s: ${met(goals.stormMet)}\n` +
          `  the gateways listened again after ${d(s.restartS, 1)} s (their start-up sent Redis ${fmt(s.startupRedisCmds)} commands); from then, half the workers were registered after ${d(s.halfS, 1)} s, 90% after ${d(s.ninetyS, 1)} s, 99% after ${d(s.ninetyNineS, 1)} s, all after ${d(s.afterListeningS, 1)} s; at most ${fmt(s.peakRegistrationsPerSec)} registrations/s\n` +
          `  Redis meanwhile: ${fmt(s.redisCmdsPerRegistration, 1)} commands per registration, ${fmt(s.meanRedisCmdsPerSec)} commands/s on average, at most ${fmt(s.peakRedisCmdsPerSec)} (${s.peakTop.map((c) => `${c.name} ${fmt(c.perSec)}`).join(', ')}); CPU ${d(s.redisCpuPct, 1)}% on average, at most ${d(s.peakRedisCpuPct, 1)}% over 250 ms; ${fmt(s.redisMaxClients)} clients at most`,
      );
    return 0;
  } finally {
    await cleanup();
  }
}
