import { parseArgs } from 'node:util';
import { createHistogram } from 'node:perf_hooks';
import { measureBullmqCycle } from './lib/bullmq-cycle.js';
import { clusterCycle } from './lib/cluster-cycle.js';
import { benchScratch, startBenchGateway } from './lib/bench-gateway.js';
import { CpuMeter, processCpuUs, type CpuTotals } from './lib/cpu.js';
import { Driver, pct, recordMs } from './lib/job-driver.js';
import { describeMachine } from './lib/machine.js';
import type { Measurement } from './lib/measurement.js';
import { deletePrefix } from './lib/redis-cleanup.js';
import { fmt, table } from './lib/report.js';
import { UserCycle } from './lib/user-cycle.js';
import { startWorkerFleet } from './lib/worker-fleet.js';

/**
 * The whole job cycle through the gateway: jobs submitted over HTTP (POST /v1/jobs), leased to
 * SDK workers running the demo engine with no delay (each uploads its PNG artifact and reports
 * `complete`), followed to `succeeded`; beside raw BullMQ add -> getNextJob -> moveToCompleted
 * on the same Redis in the same run. Then dispatch latency (submit sent -> lease received by
 * the worker) at a moderate open-loop rate with free slots waiting.
 * Goals (docs/benchmarks.md): gateway >= 40% of the raw BullMQ cycle; per job at most 250 µs of
 * Redis CPU and 1,000 µs of gateway CPU (the whole process: its main thread and the libuv pool
 * that writes the artifacts); dispatch p99 <= 10 ms.
 *
 * `--mode users` runs the cycle as users do instead: `switchyard worker --engine demo` processes
 * and one `POST /v1/jobs` with `Prefer: wait` per job, answered 201 with the finished job
 * (bench/lib/user-cycle.ts); the same CPU goals hold, and there is no dispatch-latency phase.
 *
 * "Followed to succeeded": the worker process reports each `completed` event of the SDK, which
 * fires on the gateway's ack of `complete`, sent after the run record is `succeeded`. This
 * costs the gateway nothing (polling GET /v1/jobs would load the process being measured); a
 * sample of runs is checked with GET /v1/jobs/{id} at the end.
 */
const RATIO_GOAL = 0.4;
const P99_GOAL_MS = 10;
const REDIS_US_GOAL = 250;
const GATEWAY_US_GOAL = 1_000;
const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const KIND = 'inference:image:generate';

interface CycleOptions {
  duration: number;
  warmup: number;
  concurrency: number;
  workers: number;
  slots: number;
  rate: number;
  latencyDuration: number;
  json: boolean;
  mode: 'sdk' | 'users';
  /** `--cluster`: the cycle on one server, then on a 3+3 Redis Cluster (bench/lib/cluster-cycle.ts). */
  cluster: boolean;
  /** `--accounts N` (with `--cluster`): the load's accounts, taking turns; a cluster spreads runs by account group. */
  accounts: number;
}

const fail = (why: string): never => {
  throw new Error(why);
};

function parseCycleOptions(args: string[]): CycleOptions {
  const { values } = parseArgs({
    args,
    options: {
      duration: { type: 'string', default: '10' },
      warmup: { type: 'string', default: '2' },
      concurrency: { type: 'string', default: '64' },
      workers: { type: 'string', default: '4' },
      slots: { type: 'string', default: '8' },
      rate: { type: 'string', default: '50' },
      'latency-duration': { type: 'string', default: '5' },
      json: { type: 'boolean', default: false },
      mode: { type: 'string', default: 'sdk' },
      cluster: { type: 'boolean', default: false },
      accounts: { type: 'string', default: '30' },
    },
  });
  const num = (name: string, text: string, min: number) => {
    const n = Number(text);
    if (text.trim() === '' || !Number.isFinite(n) || n < min) throw new Error(`--${name} must be a number >= ${min} (got ${JSON.stringify(text)})`);
    return n;
  };
  return {
    duration: num('duration', values.duration, 1),
    warmup: num('warmup', values.warmup, 0),
    concurrency: Math.round(num('concurrency', values.concurrency, 1)),
    workers: Math.round(num('workers', values.workers, 1)),
    slots: Math.min(64, Math.round(num('slots', values.slots, 1))),
    rate: num('rate', values.rate, 1),
    latencyDuration: num('latency-duration', values['latency-duration'], 1),
    json: values.json,
    cluster: values.cluster,
    accounts: Math.round(num('accounts', values.accounts, 1)),
    mode: values.mode === 'users' || values.mode === 'sdk' ? values.mode : fail(`--mode must be sdk or users (got ${JSON.stringify(values.mode)})`),
  };
}

export default async function cycle(args: string[]): Promise<number> {
  const o = parseCycleOptions(args);
  if (o.cluster) return clusterCycle({ ...o, kind: KIND }, (msg) => o.json || console.error(msg));
  const { prefix, dataDir, stoppers, cleanup } = await benchScratch('cycle', REDIS_URL);
  const log = (msg: string) => o.json || console.error(msg);
  const meter = new CpuMeter(REDIS_URL);

  try {
    const machine = await describeMachine(REDIS_URL);
    log(`cycle: ${o.duration} s after ${o.warmup} s warm-up, ${o.concurrency} runs in flight, ${o.workers} workers x ${o.slots} slots; latency at ${o.rate}/s for ${o.latencyDuration} s; Redis prefix ${prefix}`);

    // ---- gateway + workers -------------------------------------------------------------------
    const { server: gw, apiKey, workerToken } = await startBenchGateway({ redisUrl: REDIS_URL, prefix: `${prefix}:gw`, dataDir, profileDir: process.env.BENCH_PROFILE_DIR });
    stoppers.push(() => gw.stop());
    let gateway: Measurement;
    let latency: Latency | null = null;
    let completedIds: string[];
    let failures: string[] = [];
    if (o.mode === 'users') {
      const users = new UserCycle({ gatewayUrl: gw.url, apiKey, workerToken, workers: o.workers, slots: o.slots, kind: KIND, waitS: 60 });
      stoppers.push(() => users.stop());
      await users.start();
      log('phase 1/2: the cycle as users run it (POST /v1/jobs with Prefer: wait -> switchyard worker --engine demo -> 201 succeeded)');
      await users.closedLoop(Math.max(o.warmup, 0.5), o.concurrency);
      const stopCpu = await meter.window(gw.pid)();
      const workers0 = users.workersCpuUs();
      const r = await users.closedLoop(o.duration, o.concurrency);
      const gwCpu: CpuTotals & { fleetUs?: number } = { ...(await stopCpu()), fleetUs: users.workersCpuUs() - workers0 };
      gateway = { name: 'users cycle', jobs: r.jobs, seconds: r.seconds, jobsPerSec: r.jobs / r.seconds, p50Ms: pct(r.latency, 50), p99Ms: pct(r.latency, 99), non2xx: users.non201, errors: users.errors, cpu: gwCpu };
      completedIds = users.completedIds;
    } else {
      const run = await sdkCycle(o, gw, apiKey, workerToken, stoppers, meter, log);
      ({ gateway, latency, completedIds, failures } = run);
    }

    // ---- spot check through the API -----------------------------------------------------------
    const sample = completedIds.filter((_, i, a) => i % Math.max(1, Math.floor(a.length / 20)) === 0).slice(0, 20);
    let verified = 0;
    for (const id of sample) {
      const res = await fetch(`${gw.url}/v1/jobs/${id}`, { headers: { authorization: `Bearer ${apiKey}` } });
      const job = (await res.json()) as { status?: string; output?: { urls?: string[] } };
      if (res.status === 200 && job.status === 'succeeded' && (job.output?.urls?.length ?? 0) > 0) verified++;
    }
    const shownFailures = failures.slice(0, 5);

    for (const stop of stoppers.splice(0).reverse()) await stop();
    await deletePrefix(REDIS_URL, prefix); // the raw phase starts on a Redis as empty as the gateway's did

    // ---- raw BullMQ ---------------------------------------------------------------------------
    log('phase 3/3: raw BullMQ add -> getNextJob -> moveToCompleted');
    const raw = await measureBullmqCycle({ redisUrl: REDIS_URL, prefix: `${prefix}:raw`, concurrency: o.concurrency }, o.duration, o.warmup, meter.window());

    const ratio = gateway.jobsPerSec / raw.jobsPerSec;
    const gwCpu = gateway.cpu as CpuTotals & { fleetUs?: number };
    const goals = {
      ratioAtLeast: RATIO_GOAL,
      ratioMet: ratio >= RATIO_GOAL,
      dispatchP99AtMostMs: P99_GOAL_MS,
      dispatchP99Met: latency === null ? null : latency.dispatchP99Ms <= P99_GOAL_MS && latency.missingLeases === 0,
      redisUsPerJobAtMost: REDIS_US_GOAL,
      redisUsPerJobMet: gwCpu.redisUs / gateway.jobs <= REDIS_US_GOAL,
      gatewayUsPerJobAtMost: GATEWAY_US_GOAL,
      gatewayUsPerJobMet: gwCpu.serverUs !== undefined && gwCpu.serverUs / gateway.jobs <= GATEWAY_US_GOAL,
    };
    const perJob = (m: Measurement, extra?: number) => {
      const c = m.cpu!;
      return {
        name: m.name,
        gatewayUs: c.serverUs === undefined ? undefined : c.serverUs / m.jobs,
        gatewayMainThreadUs: c.serverMainThreadUs === undefined ? undefined : c.serverMainThreadUs / m.jobs,
        workersUs: extra === undefined ? undefined : extra / m.jobs,
        parentUs: c.parentUs / m.jobs,
        redisUs: c.redisUs / m.jobs,
        redisMainThreadUs: c.redisMainThreadUs / m.jobs,
        busyCores: c.machineBusyUs / c.wallUs,
        /** Busy machine CPU none of the measured processes accounts for: other programs, kernel. */
        otherUs: (c.machineBusyUs - (c.serverUs ?? 0) - (extra ?? 0) - c.parentUs - c.redisUs) / m.jobs,
        redisCommands: Object.entries(c.redisCommands)
          .map(([name, { calls, usec }]) => ({ name, callsPerJob: calls / m.jobs, usPerJob: usec / m.jobs }))
          .filter((x) => x.callsPerJob >= 0.01)
          .sort((a, b) => b.usPerJob - a.usPerJob)
          .slice(0, 8),
      };
    };
    const cpu = [perJob(gateway, gwCpu.fleetUs), perJob(raw)];

    if (o.json) {
      console.log(JSON.stringify({ benchmark: 'cycle', machine, options: o, phases: [gateway, raw], cpuPerJob: cpu, latency, ratio, goals, verified: { checked: sample.length, succeeded: verified }, failures: shownFailures }, null, 2));
      return 0;
    }
    const p = (r: number) => `${(r * 100).toFixed(1)}%`;
    console.log(`\nmachine: ${machine.cpus} cores (${machine.cpuModel}), Node ${machine.node}, Redis ${machine.redis}`);
    console.log(
      table(
        ['phase', 'jobs/s', 'cycle p50 ms', 'cycle p99 ms', 'jobs', 's', 'non-202', 'errors'],
        [gateway, raw].map((m) => [m.name, fmt(m.jobsPerSec), fmt(m.p50Ms, 2), fmt(m.p99Ms, 2), fmt(m.jobs), fmt(m.seconds, 1), m === raw ? '-' : fmt(m.non2xx), fmt(m.errors)]),
      ),
    );
    console.log(
      o.mode === 'users'
        ? `(${o.concurrency} requests in flight; cycle = POST /v1/jobs with Prefer: wait sent -> 201 succeeded received; ${o.workers} switchyard worker processes x ${o.slots} slots)`
        : `(${o.concurrency} runs in flight; cycle = submit sent -> succeeded seen; ${o.workers} workers x ${o.slots} slots)`,
    );
    console.log(`\ngateway cycle / raw BullMQ cycle: ${p(ratio)}  goal >= ${p(RATIO_GOAL)}: ${goals.ratioMet ? 'met' : 'NOT met'}`);
    if (latency)
      console.log(
        `\ndispatch latency at ${o.rate} jobs/s, free slots waiting (${latency.jobs} jobs${latency.missingLeases ? `, ${latency.missingLeases} without a lease` : ''}):` +
          `\n  submit sent -> lease received: p50 ${fmt(latency.dispatchP50Ms, 2)} ms, p99 ${fmt(latency.dispatchP99Ms, 2)} ms, max ${fmt(latency.dispatchMaxMs, 2)} ms` +
          `\n  submit sent -> 202 received:   p50 ${fmt(latency.submit202P50Ms, 2)} ms, p99 ${fmt(latency.submit202P99Ms, 2)} ms` +
          `\n  goal p99 <= ${P99_GOAL_MS} ms: ${goals.dispatchP99Met ? 'met' : 'NOT met'}`,
      );
    const d = (v: number | undefined) => (v === undefined ? '-' : fmt(v, 1));
    console.log('\nCPU over the measured windows, per job (Redis is shared: its figures include anything else it served)');
    console.log(
      table(
        ['phase', 'gateway µs', 'its main thread', 'workers µs', 'load gen µs', 'Redis µs', 'Redis main µs', 'other µs', 'busy cores'],
        cpu.map((c) => [c.name, d(c.gatewayUs), d(c.gatewayMainThreadUs), d(c.workersUs), d(c.parentUs), d(c.redisUs), d(c.redisMainThreadUs), d(c.otherUs), fmt(c.busyCores, 2)]),
      ),
    );
    console.log('(raw BullMQ: "load gen" is this process, which runs the queue client and the loops; other: machine busy time none of the listed processes accounts for)');
    const [g] = cpu;
    console.log(`gateway CPU per job: ${d(g.gatewayUs)} µs (main thread ${d(g.gatewayMainThreadUs)})  goal <= ${fmt(GATEWAY_US_GOAL)} µs: ${goals.gatewayUsPerJobMet ? 'met' : 'NOT met'}`);
    console.log(`Redis CPU per job: ${d(g.redisUs)} µs  goal <= ${REDIS_US_GOAL} µs: ${goals.redisUsPerJobMet ? 'met' : 'NOT met'}`);
    for (const c of cpu) console.log(`Redis commands per job, ${c.name}: ${c.redisCommands.map((x) => `${x.name} ${fmt(x.usPerJob, 1)} µs (${fmt(x.callsPerJob, 2)} calls)`).join(', ')}`);
    console.log(`\nchecked ${sample.length} followed runs with GET /v1/jobs/{id}: ${verified} succeeded with artifact URLs`);
    if (failures.length) console.log(`failed or dropped leases (${failures.length}): ${shownFailures.join('; ')}`);
    return 0;
  } finally {
    meter.close();
    await cleanup();
  }
}

/** The dispatch latency phase's figures. */
interface Latency {
  rate: number;
  jobs: number;
  missingLeases: number;
  dispatchP50Ms: number;
  dispatchP99Ms: number;
  dispatchMaxMs: number;
  submit202P50Ms: number;
  submit202P99Ms: number;
}

/**
 * The cycle through the SDK's worker fleet (one process, bench/servers/worker-fleet.ts), followed
 * by its `completed` events; then the dispatch latency at a moderate open-loop rate.
 */
async function sdkCycle(
  o: CycleOptions,
  gw: { url: string; pid: number },
  apiKey: string,
  workerToken: string,
  stoppers: Array<() => Promise<void>>,
  meter: CpuMeter,
  log: (msg: string) => void,
): Promise<{ gateway: Measurement; latency: Latency; completedIds: string[]; failures: string[] }> {
  const fleet = await startWorkerFleet({ gateway: gw.url, token: workerToken, workers: o.workers, slots: o.slots });
  stoppers.push(() => fleet.stop());
  const driver = new Driver(gw.url, apiKey, fleet, (n) => ({ kind: KIND, input: { prompt: `a lighthouse ${n}` } }));

  log('phase 1/3: gateway cycle (HTTP submit -> worker -> succeeded)');
  const probe = await driver.submit(-1);
  if (!probe) throw new Error('probe submission failed');
  await driver.completion(probe);
  if (o.warmup > 0) await driver.closedLoop(o.warmup, o.concurrency);
  const stopCpu = await meter.window(gw.pid)();
  const fleet0 = processCpuUs(fleet.pid);
  const r = await driver.closedLoop(o.duration, o.concurrency);
  const gwCpu: CpuTotals & { fleetUs?: number } = { ...(await stopCpu()), fleetUs: processCpuUs(fleet.pid) - fleet0 };
  const gateway: Measurement = {
    name: 'gateway cycle',
    jobs: r.jobs,
    seconds: r.seconds,
    jobsPerSec: r.jobs / r.seconds,
    p50Ms: pct(r.latency, 50),
    p99Ms: pct(r.latency, 99),
    non2xx: driver.non202,
    errors: driver.errors + driver.failures.length,
    cpu: gwCpu,
  };

  log(`phase 2/3: dispatch latency at ${o.rate} jobs/s`);
  await new Promise((res) => setTimeout(res, 500));
  driver.trackLeases = true;
  const sent = await driver.openLoop(o.rate, Math.round(o.rate * o.latencyDuration), 1_000_000);
  const dispatch = createHistogram();
  const accept = createHistogram();
  let maxDispatch = 0;
  let missingLeases = 0;
  for (const s of sent) {
    if (!s.runId) continue;
    recordMs(accept, s.acceptedAt - s.sentAt);
    const at = driver.leases.get(s.runId);
    if (at === undefined) {
      missingLeases++;
      continue;
    }
    const ms = at - s.sentAt;
    maxDispatch = Math.max(maxDispatch, ms);
    recordMs(dispatch, ms);
  }
  driver.trackLeases = false;
  const latency: Latency = {
    rate: o.rate,
    jobs: dispatch.count,
    missingLeases,
    dispatchP50Ms: pct(dispatch, 50),
    dispatchP99Ms: pct(dispatch, 99),
    dispatchMaxMs: maxDispatch,
    submit202P50Ms: pct(accept, 50),
    submit202P99Ms: pct(accept, 99),
  };
  return { gateway, latency, completedIds: driver.completedIds, failures: driver.failures };
}
