import { randomBytes } from 'node:crypto';
import { measureBullmq } from './lib/bullmq-load.js';
import { startChildServer, type ChildServer } from './lib/child-server.js';
import { CpuMeter } from './lib/cpu.js';
import { budgetFor, cpuPerJob } from './lib/cpu-per-job.js';
import { formatCpuReport } from './lib/cpu-report.js';
import { measureHttp } from './lib/http-load.js';
import { describeMachine } from './lib/machine.js';
import type { Measurement } from './lib/measurement.js';
import { parseLoadOptions, type LoadOptions } from './lib/options.js';
import { deletePrefix } from './lib/redis-cleanup.js';
import { formatTable, otherStatuses } from './lib/report.js';

/**
 * POST /v1/jobs throughput of the real gateway against two references at the same concurrency:
 * a bare Koa route answering a constant 202 (the HTTP ceiling) and raw BullMQ `queue.add` (the
 * queue ceiling). Phases run one after another so they never compete for the 2 cores.
 * Goal (docs/benchmarks.md): gateway >= 50% of bare Koa. Each phase also records the CPU its
 * measured window cost (server, Redis, load generator), to show whether the goal fits in the cores.
 */
const GOAL = 0.5;
const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const SUBMIT_BODY = JSON.stringify({ kind: 'inference:image:generate', input: { prompt: 'a lighthouse' } });

async function bareKoa(o: LoadOptions, meter: CpuMeter): Promise<Measurement> {
  const server = await startChildServer('bare-koa-server.ts', {}, o.profileDir);
  try {
    const load = { name: 'bare Koa 202', url: `${server.url}/v1/jobs`, body: SUBMIT_BODY, headers: {}, acceptedStatus: 202, connections: o.connections };
    return await measureHttp(load, o.duration, o.warmup, meter.window(server.pid));
  } finally {
    await server.stop();
  }
}

/** An account with credits no run can exhaust, made through the admin API like an operator would. */
async function createAccount(server: ChildServer, adminToken: string): Promise<string> {
  const res = await fetch(`${server.url}/v1/admin/accounts`, {
    method: 'POST',
    headers: { authorization: `Bearer ${adminToken}`, 'content-type': 'application/json' },
    body: JSON.stringify({ name: 'bench', credits: 1e12 }),
  });
  if (res.status !== 201) throw new Error(`account creation failed: ${res.status} ${await res.text()}`);
  return ((await res.json()) as { api_key: string }).api_key;
}

async function gateway(o: LoadOptions, prefix: string, meter: CpuMeter): Promise<Measurement> {
  const adminToken = randomBytes(24).toString('hex');
  const server = await startChildServer(
    'gateway-server.ts',
    { PORT: '0', HOST: '127.0.0.1', REDIS_URL, REDIS_PREFIX: prefix, ADMIN_TOKEN: adminToken, LOG_LEVEL: 'warn', RATE_LIMIT_PER_SEC: '1000000', RATE_LIMIT_BURST: '1000000' },
    o.profileDir,
  );
  try {
    const apiKey = await createAccount(server, adminToken);
    const load = {
      name: 'gateway POST /v1/jobs',
      url: `${server.url}/v1/jobs`,
      body: SUBMIT_BODY,
      headers: { authorization: `Bearer ${apiKey}` },
      acceptedStatus: 202,
      connections: o.connections,
    };
    // One submission first, so a broken setup fails with its reason instead of a table of 4xx.
    const probe = await fetch(load.url, { method: 'POST', headers: { 'content-type': 'application/json', ...load.headers }, body: load.body });
    if (probe.status !== 202) throw new Error(`probe submission failed: ${probe.status} ${await probe.text()}`);
    return await measureHttp(load, o.duration, o.warmup, meter.window(server.pid));
  } finally {
    await server.stop();
  }
}

export default async function submit(args: string[]): Promise<number> {
  const o = parseLoadOptions(args);
  const prefix = `bench-submit-${randomBytes(4).toString('hex')}`;
  const cleanup = () => deletePrefix(REDIS_URL, prefix);
  // Ctrl-C mid-run still removes what the phases wrote.
  process.once('SIGINT', () => void cleanup().finally(() => process.exit(130)));
  const log = (msg: string) => o.json || console.error(msg);
  const meter = new CpuMeter(REDIS_URL);

  try {
    const machine = await describeMachine(REDIS_URL);
    const phases: Measurement[] = [];
    log(`submit: ${o.duration} s per phase after ${o.warmup} s warm-up, ${o.connections} connections; Redis prefix ${prefix}`);
    log('phase 1/3: bare Koa');
    phases.push(await bareKoa(o, meter));
    log('phase 2/3: gateway');
    phases.push(await gateway(o, `${prefix}:gw`, meter));
    await cleanup(); // so the BullMQ phase starts on a Redis as empty as the gateway's did
    log('phase 3/3: raw BullMQ');
    phases.push(await measureBullmq({ redisUrl: REDIS_URL, prefix: `${prefix}:raw`, concurrency: o.connections }, o.duration, o.warmup, meter.window()));

    const [koa, gw, bull] = phases;
    const ratios = { gatewayToBareKoa: gw.jobsPerSec / koa.jobsPerSec, gatewayToRawBullmq: gw.jobsPerSec / bull.jobsPerSec };
    const goal = { gatewayToBareKoaAtLeast: GOAL, met: ratios.gatewayToBareKoa >= GOAL };
    const cpu = phases.map((m) => ({ name: m.name, cpu: cpuPerJob(m, machine.cpus) }));
    const gwCpu = cpu[1].cpu;
    const goalNeeds = budgetFor(GOAL * koa.jobsPerSec, machine.cpus);

    if (o.json) {
      const ceilings = { gatewayEventLoopJobsPerSec: gwCpu?.eventLoopCapJobsPerSec, gatewayRedisThreadJobsPerSec: gwCpu?.redisThreadCapJobsPerSec, gatewayCoresJobsPerSec: gwCpu?.coresCapJobsPerSec, goalNeeds };
      console.log(JSON.stringify({ benchmark: 'submit', machine, options: o, phases, cpuPerJob: cpu.map((c) => ({ name: c.name, ...c.cpu })), ceilings, ratios, goal }, null, 2));
      return 0;
    }
    console.log(`\nmachine: ${machine.cpus} cores (${machine.cpuModel}), Node ${machine.node}, Redis ${machine.redis}`);
    console.log(formatTable(phases));
    for (const m of phases) {
      const other = otherStatuses(m, 202);
      if (other) console.log(`${m.name}: other statuses ${other}`);
    }
    const pct = (r: number) => `${(r * 100).toFixed(1)}%`;
    console.log(`\ngateway / bare Koa:   ${pct(ratios.gatewayToBareKoa)}`);
    console.log(`gateway / raw BullMQ: ${pct(ratios.gatewayToRawBullmq)}`);
    console.log(`goal (gateway >= ${pct(GOAL)} of bare Koa): ${goal.met ? 'met' : 'NOT met'}`);

    console.log(`\n${formatCpuReport(cpu, gwCpu, pct(GOAL), goalNeeds, machine.cpus)}`);
    return 0;
  } finally {
    meter.close();
    await cleanup();
  }
}
