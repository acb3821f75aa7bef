import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import { Redis } from 'ioredis';
import { benchScratch, startBenchGateway } from './lib/bench-gateway.js';
import { addCpuTotals, CpuMeter, processCpuUs, type CpuTotals } from './lib/cpu.js';
import { cpuPerJob, type CpuPerJob } from './lib/cpu-per-job.js';
import { Driver, type Sent } from './lib/job-driver.js';
import { describeMachine } from './lib/machine.js';
import type { Measurement } from './lib/measurement.js';
import { redisClientsOf, type ProcessRedisClients } from './lib/redis-clients.js';
import { fmt, percentile, table } from './lib/report.js';
import type { ChildServer } from './lib/child-server.js';
import { modelId, startWorkerFleet, type WorkerFleet } from './lib/worker-fleet.js';

/**
 * Dispatch latency with many models against one: the gateway in a child process, `workers`
 * in-process SDK workers (real WebSockets) in a second child process (bench/servers/worker-fleet.ts,
 * so the gateway's CPU is its own), jobs submitted over HTTP in this process, open loop at `rate`.
 *   A. every worker advertises the one model m-000; every job names it;
 *   B. `models` distinct models (m-000 ... m-099 by default), workers/models workers each;
 *      each job names one of them, drawn uniformly at random.
 * Each phase has its own gateway, fleet and Redis prefix; both are started (and warmed up) first,
 * then measured in alternating slices, A B B A A B..., `rounds` slices each, so whatever else
 * runs on the shared machine meanwhile falls on both alike. The workers complete every job at
 * once (no artifact) and have free slots, so what is measured is the gateway's work.
 * Latencies: this process takes performance.timeOrigin + performance.now() just before each
 * fetch and when its 202 has arrived; the worker process takes the same clock in the SDK's `lease`
 * event (fired as the lease frame is parsed, before the handler runs). Dispatch latency is
 * 202 received -> lease received; submit sent -> lease is printed beside it.
 * Goal (the issue, docs/benchmarks.md): dispatch p99 with 100 models within 1.5x of one model's.
 */
const GOAL_RATIO = 1.5;
const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const KIND = 'inference:llm:text-generate';
const MEASURED_FROM = 1_000_000; // job numbers of the measured window; warm-up jobs count from 0

interface Options {
  rate: number;
  /** Jobs measured per phase (default rate x duration), in `rounds` slices. */
  jobs: number;
  rounds: number;
  warmup: number;
  /** Seconds of the idle window (both fleets connected, no jobs) before the measured slices. */
  idle: number;
  workers: number;
  models: number;
  slots: number;
  json: boolean;
  profileDir?: string;
}

function parseOptions(args: string[]): Options {
  const { values } = parseArgs({
    args,
    options: {
      rate: { type: 'string', default: '50' },
      duration: { type: 'string', default: '20' },
      jobs: { type: 'string' },
      rounds: { type: 'string', default: '10' },
      warmup: { type: 'string', default: '3' },
      idle: { type: 'string', default: '5' },
      workers: { type: 'string', default: '200' },
      models: { type: 'string', default: '100' },
      slots: { type: 'string', default: '4' },
      json: { type: 'boolean', default: false },
      profile: { type: 'string' },
    },
  });
  const num = (name: string, text: string, min: number) => {
    const n = Number(text);
    if (text.trim() === '' || !Number.isFinite(n) || n < min) throw new Error(`--${name} must be a number >= ${min} (got ${JSON.stringify(text)})`);
    return n;
  };
  const rate = num('rate', values.rate, 1);
  const o: Options = {
    rate,
    jobs: Math.round(values.jobs === undefined ? rate * num('duration', values.duration, 1) : num('jobs', values.jobs, 1)),
    rounds: Math.round(num('rounds', values.rounds, 1)),
    warmup: num('warmup', values.warmup, 0),
    idle: num('idle', values.idle, 1),
    workers: Math.round(num('workers', values.workers, 1)),
    models: Math.round(num('models', values.models, 1)),
    slots: Math.min(64, Math.round(num('slots', values.slots, 1))),
    json: values.json,
    profileDir: values.profile,
  };
  if (o.models > o.workers) throw new Error(`--models (${o.models}) must not exceed --workers (${o.workers}): every model needs a worker`);
  return o;
}

/** p50 / p99 / max of signed ms values. */
interface Spread {
  p50: number;
  p99: number;
  max: number;
}

function spread(values: number[]): Spread {
  const sorted = Float64Array.from(values).sort();
  return { p50: percentile(sorted, 0.5), p99: percentile(sorted, 0.99), max: percentile(sorted, 1) };
}

/** One setup under test: its gateway, its fleet, and what its measured slices added up to. */
interface Side {
  name: string;
  prefix: string;
  models: number;
  gw: ChildServer;
  fleet: WorkerFleet;
  driver: Driver;
  sent: Sent[];
  cpu?: CpuTotals;
  workersUs: number;
  /** CPU of the other setup's gateway and fleet (idle) during this setup's slices. */
  otherSideUs: number;
  warmFailures: number;
}

/** One slice of one setup: its dispatch latency tail, and how busy the machine was meanwhile. */
interface SliceSummary {
  name: string;
  round: number;
  p99Ms: number;
  maxMs: number;
  busyCores: number;
  /** Busy cores that none of the bench's processes (nor Redis) account for: other programs. */
  otherCores: number;
}

/** CPU per second of wall time while both fleets are connected and no job arrives. */
interface Idle {
  seconds: number;
  /** Per setup, in the order of the phases. */
  gatewayCores: number[];
  workersCores: number[];
  /** Redis serves both setups (and anyone else on the shared server). */
  redisCores: number;
  /** Redis commands per second, most execution time first. */
  redisCommands: { name: string; callsPerSec: number; usPerSec: number }[];
}

interface PhaseResult {
  name: string;
  prefix: string;
  models: number;
  workersPerModel: number;
  submitted: number;
  accepted: number;
  seconds: number;
  missingLeases: number;
  non202: number;
  errors: number;
  failures: string[];
  /** 202 received by this process -> lease received by the worker; negative when the lease came first. */
  acceptedToLease: Spread;
  /** Submit sent -> lease received by the worker. */
  sentToLease: Spread;
  /** Submit sent -> 202 received. */
  sentTo202: Spread;
  /** Leases that reached the worker before the 202 reached this process. */
  leaseBefore202: number;
  cpu: CpuPerJob;
  workersUsPerJob: number;
  /** other µs/job of cpuPerJob without the worker process and the idle other setup, which it does not know. */
  otherUsPerJob: number;
  /** What the slices cost above the idle rate (gateway: its own; Redis: both setups'), per job: the jobs' own cost. */
  aboveIdle: { gatewayUsPerJob: number; redisUsPerJob: number };
  redisClients: ProcessRedisClients;
  /** BullMQ queues under the phase's prefix (their `meta` keys). */
  queues: number;
}

async function countQueues(redis: Redis, prefix: string): Promise<number> {
  let cursor = '0';
  let n = 0;
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}:*:meta`, 'COUNT', 1000);
    cursor = next;
    n += keys.length;
  } while (cursor !== '0');
  return n;
}

/** A gateway and a fleet serving `models` models, warmed up with jobs for each of them. */
async function startSide(name: string, models: number, o: Options, prefix: string, dataDir: string, stoppers: Array<() => Promise<void>>, log: (m: string) => void): Promise<Side> {
  const { server: gw, apiKey, workerToken } = await startBenchGateway({ redisUrl: REDIS_URL, prefix, dataDir, profileDir: o.profileDir });
  stoppers.push(() => gw.stop());
  log(`  ${name}: starting ${o.workers} workers x ${o.slots} slots, ${models} model(s)`);
  const fleet = await startWorkerFleet({ gateway: gw.url, token: workerToken, workers: o.workers, slots: o.slots, kind: KIND, models, handler: 'noop' });
  stoppers.push(() => fleet.stop());
  // Warm-up jobs go round-robin over the models, so every model queue exists before the
  // measured slices; measured jobs draw their model uniformly at random.
  const driver = new Driver(gw.url, apiKey, fleet, (n) => ({
    kind: KIND,
    input: { prompt: `bench ${n}`, model: modelId(n < MEASURED_FROM ? n % models : Math.floor(Math.random() * models)) },
  }));
  const probe = await driver.submit(0);
  if (!probe) throw new Error(`${name}: probe submission failed (${driver.non202} non-202, ${driver.errors} errors)`);
  await driver.completion(probe);
  const warmupJobs = Math.max(models, Math.round(o.rate * o.warmup));
  log(`  ${name}: warm-up, ${warmupJobs} jobs at ${o.rate}/s`);
  await driver.openLoop(o.rate, warmupJobs, 1);
  const side: Side = { name, prefix, models, gw, fleet, driver, sent: [], workersUs: 0, otherSideUs: 0, warmFailures: driver.failures.length };
  driver.non202 = 0;
  driver.errors = 0;
  driver.trackLeases = true;
  return side;
}

const sideUs = (s: Side) => processCpuUs(s.gw.pid) + processCpuUs(s.fleet.pid);

/** Both setups connected, no jobs: the fixed cost of the fleets and the queues. */
async function measureIdle(sides: Side[], meter: CpuMeter, seconds: number): Promise<Idle> {
  const stop = await meter.window()();
  const gw0 = sides.map((s) => processCpuUs(s.gw.pid));
  const fleet0 = sides.map((s) => processCpuUs(s.fleet.pid));
  await sleep(seconds * 1000);
  const c = await stop();
  const sec = c.wallUs / 1e6;
  return {
    seconds: sec,
    gatewayCores: sides.map((s, i) => (processCpuUs(s.gw.pid) - gw0[i]) / c.wallUs),
    workersCores: sides.map((s, i) => (processCpuUs(s.fleet.pid) - fleet0[i]) / c.wallUs),
    redisCores: c.redisUs / c.wallUs,
    redisCommands: Object.entries(c.redisCommands)
      .map(([cmd, { calls, usec }]) => ({ name: cmd, callsPerSec: calls / sec, usPerSec: usec / sec }))
      .sort((x, y) => y.usPerSec - x.usPerSec),
  };
}

/** 202 received -> lease received of each accepted job that got a lease, and how many got none. */
function dispatchTimes(sent: Sent[], leases: Map<string, number>) {
  const acceptedToLease: number[] = [];
  const sentToLease: number[] = [];
  const sentTo202: number[] = [];
  let missing = 0;
  for (const s of sent) {
    if (!s.runId) continue;
    sentTo202.push(s.acceptedAt - s.sentAt);
    const at = leases.get(s.runId);
    if (at === undefined) {
      missing++;
      continue;
    }
    sentToLease.push(at - s.sentAt);
    acceptedToLease.push(at - s.acceptedAt);
  }
  return { acceptedToLease, sentToLease, sentTo202, missing };
}

/** One measured slice of `side`: `jobs` submissions at the rate, CPU counted around them. */
async function slice(side: Side, other: Side, o: Options, round: number, jobs: number, meter: CpuMeter): Promise<SliceSummary> {
  const stop = await meter.window(side.gw.pid)();
  const fleet0 = processCpuUs(side.fleet.pid);
  const other0 = sideUs(other);
  const sent = await side.driver.openLoop(o.rate, jobs, MEASURED_FROM + round * jobs);
  const c = await stop();
  const workersUs = processCpuUs(side.fleet.pid) - fleet0;
  const otherSideUs = sideUs(other) - other0;
  side.sent.push(...sent);
  side.cpu = addCpuTotals(side.cpu, c);
  side.workersUs += workersUs;
  side.otherSideUs += otherSideUs;
  const t = spread(dispatchTimes(sent, side.driver.leases).acceptedToLease);
  const ours = c.serverUs! + c.redisUs + c.parentUs + workersUs + otherSideUs;
  return { name: side.name, round, p99Ms: t.p99, maxMs: t.max, busyCores: c.machineBusyUs / c.wallUs, otherCores: (c.machineBusyUs - ours) / c.wallUs };
}

async function result(side: Side, idle: Idle, idleIndex: number, cores: number, redis: Redis, workers: number): Promise<PhaseResult> {
  const { driver } = side;
  const cpu = side.cpu!;
  const { acceptedToLease, sentToLease, sentTo202, missing: missingLeases } = dispatchTimes(side.sent, driver.leases);
  const accepted = sentTo202.length;
  const seconds = cpu.wallUs / 1e6;
  const m: Measurement = {
    name: side.name,
    jobs: accepted,
    seconds,
    jobsPerSec: accepted / seconds,
    p50Ms: NaN,
    p99Ms: NaN,
    non2xx: driver.non202,
    errors: driver.errors,
    statusCodes: { 202: accepted, other: driver.non202 + driver.errors },
    cpu,
  };
  const perJob = cpuPerJob(m, cores);
  if (!perJob) throw new Error(`${side.name}: no job was accepted`);
  return {
    name: side.name,
    prefix: side.prefix,
    models: side.models,
    workersPerModel: workers / side.models,
    submitted: side.sent.length,
    accepted,
    seconds,
    missingLeases,
    non202: driver.non202,
    errors: driver.errors,
    failures: driver.failures.slice(side.warmFailures),
    acceptedToLease: spread(acceptedToLease),
    sentToLease: spread(sentToLease),
    sentTo202: spread(sentTo202),
    leaseBefore202: acceptedToLease.filter((x) => x < 0).length,
    cpu: perJob,
    workersUsPerJob: side.workersUs / accepted,
    otherUsPerJob: perJob.otherUsPerJob - (side.workersUs + side.otherSideUs) / accepted,
    aboveIdle: {
      gatewayUsPerJob: (cpu.serverUs! - idle.gatewayCores[idleIndex] * cpu.wallUs) / accepted,
      redisUsPerJob: (cpu.redisUs - idle.redisCores * cpu.wallUs) / accepted,
    },
    redisClients: await redisClientsOf(redis, side.gw.pid),
    queues: await countQueues(redis, side.prefix),
  };
}

function report(o: Options, phases: PhaseResult[], order: SliceSummary[], idle: Idle, ratio: number, sentRatio: number, met: boolean): string {
  const ms = (n: number) => fmt(n, 2);
  const us = (n: number) => fmt(n, 1);
  const out: string[] = [];
  out.push(`dispatch latency at ${fmt(o.rate)} jobs/s, ${o.workers} workers x ${o.slots} slots, free slots waiting; kind ${KIND}; ${o.rounds} alternating slices per phase`);
  out.push(
    table(
      ['phase', 'jobs', '202->lease p50', 'p99', 'max', 'sent->lease p50', 'p99', 'max', 'sent->202 p50', 'p99', 'lease<202'],
      phases.map((p) => [
        p.name, fmt(p.accepted),
        ms(p.acceptedToLease.p50), ms(p.acceptedToLease.p99), ms(p.acceptedToLease.max),
        ms(p.sentToLease.p50), ms(p.sentToLease.p99), ms(p.sentToLease.max),
        ms(p.sentTo202.p50), ms(p.sentTo202.p99), fmt(p.leaseBefore202),
      ]),
    ),
  );
  out.push('(ms; dispatch latency is 202->lease: from the 202 of POST /v1/jobs received here to the SDK `lease` event in the worker process;');
  out.push(' sent: just before the fetch; negative 202->lease values are leases that reached the worker before the 202 reached this process: lease<202)');
  for (const p of phases) {
    const problems = [
      p.missingLeases && `${p.missingLeases} accepted jobs without a lease`,
      p.non202 && `${p.non202} non-202`,
      p.errors && `${p.errors} errors`,
      p.failures.length && `${p.failures.length} failed, dropped or misrouted leases: ${p.failures.slice(0, 5).join('; ')}`,
    ].filter(Boolean);
    if (problems.length) out.push(`${p.name}: ${problems.join(', ')}`);
  }
  out.push('');
  out.push('per slice, in the order run: dispatch (202->lease) p99 / max ms, busy cores, and busy cores of other programs');
  out.push(table(['slice', 'phase', 'p99', 'max', 'busy cores', 'other cores'], order.map((x) => [String(x.round + 1), x.name, ms(x.p99Ms), ms(x.maxMs), fmt(x.busyCores, 2), fmt(x.otherCores, 2)])));
  const [a, b] = phases;
  out.push('');
  out.push(`dispatch p99 (202->lease), ${b.models} models / 1 model: ${ms(b.acceptedToLease.p99)} / ${ms(a.acceptedToLease.p99)} ms = ${fmt(ratio, 2)}x  goal <= ${GOAL_RATIO}x: ${met ? 'met' : 'NOT met'}`);
  out.push(`p99 sent->lease, ${b.models} models / 1 model: ${ms(b.sentToLease.p99)} / ${ms(a.sentToLease.p99)} ms = ${fmt(sentRatio, 2)}x`);
  out.push('');
  out.push('CPU over the measured windows, per accepted job (Redis is shared: its figures include anything else it served)');
  out.push(
    table(
      ['phase', 'gateway µs', 'its main thread', 'Redis µs', 'Redis main µs', 'workers µs', 'load gen µs', 'other µs', 'busy cores'],
      phases.map((p) => [p.name, us(p.cpu.processUsPerJob), us(p.cpu.processMainThreadUsPerJob), us(p.cpu.redisUsPerJob), us(p.cpu.redisMainThreadUsPerJob), us(p.workersUsPerJob), us(p.cpu.loadGenUsPerRequest ?? NaN), us(p.otherUsPerJob), fmt(p.cpu.busyCores, 2)]),
    ),
  );
  out.push('(gateway: its child process, all threads; workers: the worker-fleet child; load gen: this process; Redis includes the other, idle setup\'s background;\n other: machine busy time none of these nor the other setup\'s processes account for)');
  for (const p of phases) {
    out.push(`Redis commands per job, ${p.name}: ${p.cpu.redisCommands.slice(0, 8).map((x) => `${x.name} ${us(x.usPerJob)} µs (${fmt(x.callsPerJob, 2)} calls)`).join(', ')}`);
  }
  out.push('(command time excludes socket I/O; commands a Lua script runs also count inside its evalsha)');
  out.push('');
  out.push(`idle: both setups connected (2 x ${o.workers} workers), no jobs, ${fmt(idle.seconds, 1)} s before the slices; and the slices' CPU above that rate`);
  out.push(
    table(
      ['phase', 'gateway cores idle', 'workers cores idle', 'gateway µs/job above idle', 'Redis µs/job above idle'],
      phases.map((p, i) => [p.name, fmt(idle.gatewayCores[i], 3), fmt(idle.workersCores[i], 3), us(p.aboveIdle.gatewayUsPerJob), us(p.aboveIdle.redisUsPerJob)]),
    ),
  );
  out.push(`Redis idle (both setups, and anything else on the shared server): ${fmt(idle.redisCores, 3)} cores; per second: ${idle.redisCommands.slice(0, 6).map((x) => `${x.name} ${fmt(x.callsPerSec, 1)} (${us(x.usPerSec)} µs)`).join(', ')}`);
  out.push('');
  out.push('Redis connections of the gateway process (CLIENT LIST, matched to its sockets), and BullMQ queues under the phase prefix');
  out.push(
    table(
      ['phase', 'connections', 'by name', 'queues'],
      phases.map((p) => [p.name, fmt(p.redisClients.count), Object.entries(p.redisClients.byName).sort().map(([n, c]) => `${n.replace(p.prefix, '<prefix>')} ${c}`).join(', '), fmt(p.queues)]),
    ),
  );
  return out.join('\n');
}

export default async function dispatchModels(args: string[]): Promise<number> {
  const o = parseOptions(args);
  const { prefix, dataDir, stoppers, cleanup } = await benchScratch('dispatch-models', REDIS_URL);
  const redis = new Redis(REDIS_URL);
  const meter = new CpuMeter(REDIS_URL);
  const log = (msg: string) => o.json || console.error(msg);

  try {
    const machine = await describeMachine(REDIS_URL);
    const perSlice = Math.max(1, Math.round(o.jobs / o.rounds));
    log(`dispatch-models: ${perSlice * o.rounds} jobs per phase at ${o.rate}/s in ${o.rounds} alternating slices, after ${o.warmup} s warm-up; ${o.workers} workers per phase; 1 model, then ${o.models}; Redis prefix ${prefix}`);
    log('setup: one model');
    const a = await startSide('1 model', 1, o, `${prefix}:a`, dataDir, stoppers, log);
    log(`setup: ${o.models} models`);
    const b = await startSide(`${o.models} models`, o.models, o, `${prefix}:b`, dataDir, stoppers, log);
    const sides = [a, b];
    await sleep(500);
    log(`idle for ${o.idle} s (both fleets connected, no jobs)`);
    const idle = await measureIdle(sides, meter, o.idle);
    const order: SliceSummary[] = [];
    for (let r = 0; r < o.rounds; r++) {
      for (const side of r % 2 === 0 ? [a, b] : [b, a]) {
        log(`  slice ${r + 1}/${o.rounds}: ${side.name}, ${perSlice} jobs`);
        order.push(await slice(side, side === a ? b : a, o, r, perSlice, meter));
      }
    }
    const phases = [await result(a, idle, 0, machine.cpus, redis, o.workers), await result(b, idle, 1, machine.cpus, redis, o.workers)];
    const [pa, pb] = phases;
    const ratio = pb.acceptedToLease.p99 / pa.acceptedToLease.p99;
    const sentRatio = pb.sentToLease.p99 / pa.sentToLease.p99;
    const clean = phases.every((p) => p.missingLeases === 0 && p.failures.length === 0 && p.non202 === 0 && p.errors === 0);
    const met = ratio <= GOAL_RATIO && clean;
    if (o.json) {
      console.log(JSON.stringify({ benchmark: 'dispatch-models', machine, options: o, kind: KIND, phases, slices: order, idle, ratio, sentRatio, goal: { ratioAtMost: GOAL_RATIO, met } }, null, 2));
      return 0;
    }
    console.log(`\nmachine: ${machine.cpus} cores (${machine.cpuModel}), Node ${machine.node}, Redis ${machine.redis}`);
    console.log(report(o, phases, order, idle, ratio, sentRatio, met));
    return 0;
  } finally {
    meter.close();
    redis.disconnect();
    await cleanup();
  }
}
