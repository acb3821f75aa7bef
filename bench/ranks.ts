import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { benchScratch, startBenchGateway, startGatewayInstance, type BenchGatewayOptions } from './lib/bench-gateway.js';
import { startChildServer } from './lib/child-server.js';
import { CpuMeter, mainThreadCpuUs, processCpuUs } from './lib/cpu.js';
import { frameOf, RankPeer, RelayPeer, type FramePeer } from './lib/frame-peers.js';
import { pingPong, stream } from './lib/frame-load.js';
import { describeMachine } from './lib/machine.js';
import { number } from './lib/options.js';
import { fmt, percentile, table } from './lib/report.js';

/**
 * The activation path of ranked models (issue 27, docs/ranks.md "The activation path"): what
 * the gateway costs per forwarded megabyte and how much latency each hop adds. Two rank workers
 * of a 2-rank model (bench/lib/frame-peers.ts, raw protocol 6, in this process) hold one
 * pipeline, and three paths carry the same frames between the same clients:
 *   - bare relay: bench/servers/bare-frame-relay.ts, a `ws` server that passes each binary
 *     message from one socket to the other, with the gateway's back-pressure rule and nothing else;
 *   - one instance: rank 0 and rank 1 on one gateway child (dispatch/pipelines/frame-router.ts,
 *     socket to socket);
 *   - two instances: rank 0 on gateway A, rank 1 on gateway B, two children on one Redis
 *     (dispatch/pipelines/pipeline-bus.ts: pub/sub, the receiver's instance acking the bytes).
 * Throughput: rank 0 streams `mb` MB of frames of each `--sizes` payload to rank 1 as fast as
 * its socket's back-pressure allows; MB/s and CPU per MB of the server processes (all summed),
 * Redis and the clients. Latency: `rounds` sequential round trips of each `--latency-sizes`
 * payload, rank 0 to rank 1 and straight back (the loop from the last rank to rank 0 is a hop
 * too), reported per hop (round trip / 2), and the gateway's over the bare relay's.
 */
const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const LLM = 'inference:llm:text-generate';
const MODEL = 'bench-ranked';
const MB = 1e6;
const KiB = 1024;

interface Options {
  /** Payload MB (10^6 bytes) per throughput case. */
  mb: number;
  warmupMb: number;
  /** Throughput payloads, bytes. */
  sizes: number[];
  /** Latency payloads, bytes. */
  latencySizes: number[];
  rounds: number;
  warmupRounds: number;
  /** Bytes rank 0 lets wait in its socket before it waits for writes. */
  capBytes: number;
  paths: PathName[];
  json: boolean;
  profileDir?: string;
}

const PATHS = ['relay', 'one', 'two'] as const;
type PathName = (typeof PATHS)[number];
const PATH_LABEL: Record<PathName, string> = { relay: 'bare relay', one: 'one instance', two: 'two instances' };

function list(name: string, text: string, unit: number): number[] {
  return text.split(',').map((t) => Math.round(number(name, t, 0) * unit));
}

function parseOptions(args: string[]): Options {
  const { values } = parseArgs({
    args,
    options: {
      mb: { type: 'string', default: '256' },
      'warmup-mb': { type: 'string', default: '32' },
      sizes: { type: 'string', default: '256,16' },
      'latency-sizes': { type: 'string', default: '64,4096' },
      rounds: { type: 'string', default: '2000' },
      'warmup-rounds': { type: 'string', default: '300' },
      'cap-mib': { type: 'string', default: '4' },
      paths: { type: 'string', default: PATHS.join(',') },
      json: { type: 'boolean', default: false },
      profile: { type: 'string' },
    },
  });
  const paths = values.paths.split(',') as PathName[];
  for (const p of paths) if (!PATHS.includes(p)) throw new Error(`--paths takes ${PATHS.join(', ')} (got ${JSON.stringify(p)})`);
  const sizes = list('sizes', values.sizes, KiB);
  if (sizes.some((s) => s < 1 || s > 1000 * KiB)) throw new Error('--sizes are KiB, 1 to 1000 (a frame is at most 1 MiB with its header)');
  return {
    mb: number('mb', values.mb, 1),
    warmupMb: number('warmup-mb', values['warmup-mb'], 0),
    sizes,
    latencySizes: list('latency-sizes', values['latency-sizes'], 1),
    rounds: Math.round(number('rounds', values.rounds, 10)),
    warmupRounds: Math.round(number('warmup-rounds', values['warmup-rounds'], 0)),
    capBytes: number('cap-mib', values['cap-mib'], 0.0625) * KiB * KiB,
    paths,
    json: values.json,
    profileDir: values.profile ?? process.env.BENCH_PROFILE_DIR,
  };
}

/** One path set up: rank 0's end, rank 1's end, and the processes carrying frames between them. */
interface Setup {
  a: FramePeer;
  b: FramePeer;
  pids: number[];
}

/** CPU over one window: the server processes (summed), their main threads, Redis, this process, the machine. */
interface Cpu {
  serverUs: number;
  serverMainUs: number;
  redisUs: number;
  clientsUs: number;
  machineBusyUs: number;
  wallUs: number;
}

async function cpuWindow(meter: CpuMeter, pids: number[]): Promise<() => Promise<Cpu>> {
  const sum = (f: (pid: number) => number) => pids.reduce((n, pid) => n + f(pid), 0);
  const server0 = sum(processCpuUs);
  const main0 = sum(mainThreadCpuUs);
  const end = await meter.window()();
  return async () => {
    const server = sum(processCpuUs) - server0;
    const main = sum(mainThreadCpuUs) - main0;
    const c = await end();
    return { serverUs: server, serverMainUs: main, redisUs: c.redisUs, clientsUs: c.parentUs, machineBusyUs: c.machineBusyUs, wallUs: c.wallUs };
  };
}

interface StreamRow {
  path: string;
  payload: number;
  frames: number;
  seconds: number;
  mbPerSec: number;
  cpu: Cpu;
}

interface LatencyRow {
  path: string;
  payload: number;
  rounds: number;
  /** Per hop, µs: round trip / 2. */
  hopP50Us: number;
  hopP99Us: number;
  cpu: Cpu;
}

/** Rejects if `p` takes longer than `ms`: a broken pipeline would otherwise hang the run. */
async function within<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`${what} did not finish within ${ms / 1000} s`)), ms)));
  try {
    return await Promise.race([p, late]);
  } finally {
    clearTimeout(timer);
  }
}

async function measureStream(label: string, s: Setup, payload: number, o: Options, meter: CpuMeter): Promise<StreamRow> {
  const frame = frameOf(payload);
  const warm = Math.ceil((o.warmupMb * MB) / payload);
  if (warm) await within(stream(s.a, s.b, frame, warm, o.capBytes), 120_000, `${label}: the warm-up`);
  const frames = Math.ceil((o.mb * MB) / payload);
  const stop = await cpuWindow(meter, s.pids);
  const t0 = performance.now();
  await within(stream(s.a, s.b, frame, frames, o.capBytes), 600_000, `${label}: ${o.mb} MB of ${payload} B frames`);
  const seconds = (performance.now() - t0) / 1000;
  const cpu = await stop();
  return { path: label, payload, frames, seconds, mbPerSec: (frames * payload) / MB / seconds, cpu };
}

async function measureLatency(label: string, s: Setup, payload: number, o: Options, meter: CpuMeter): Promise<LatencyRow> {
  const frame = frameOf(payload);
  if (o.warmupRounds) await within(pingPong(s.a, s.b, frame, o.warmupRounds), 120_000, `${label}: the latency warm-up`);
  const stop = await cpuWindow(meter, s.pids);
  const times = await within(pingPong(s.a, s.b, frame, o.rounds), 600_000, `${label}: ${o.rounds} round trips`);
  const cpu = await stop();
  times.sort();
  return { path: label, payload, rounds: o.rounds, hopP50Us: percentile(times, 0.5) / 2, hopP99Us: percentile(times, 0.99) / 2, cpu };
}

/** One gateway (or two on one store), the 2-rank model declared, rank 0 and rank 1 connected and leased one job. */
async function gatewayPath(which: 'one' | 'two', base: BenchGatewayOptions, stoppers: Array<() => Promise<void>>): Promise<Setup> {
  const first = await startBenchGateway({ ...base, profileDir: base.profileDir && path.join(base.profileDir, `${which}-a`) });
  stoppers.push(() => first.server.stop());
  let second = first.server;
  if (which === 'two') {
    second = await startGatewayInstance({ ...base, profileDir: base.profileDir && path.join(base.profileDir, `${which}-b`) }, first.adminToken);
    stoppers.push(() => second.stop());
  }
  const declared = await fetch(`${first.server.url}/v1/admin/models/${LLM}/${MODEL}`, { method: 'PUT', headers: { authorization: `Bearer ${first.adminToken}`, 'content-type': 'application/json' }, body: JSON.stringify({ ranks: 2 }) });
  if (!declared.ok) throw new Error(`declaring ${MODEL}: ${declared.status} ${await declared.text()}`);
  const rank = (url: string, index: number) => RankPeer.connect({ url, token: first.workerToken, kind: LLM, model: MODEL, index, count: 2 });
  const r0 = await rank(first.server.url, 0);
  const r1 = await rank(second.url, 1);
  stoppers.push(async () => (r0.close(), r1.close()));
  const leased = Promise.all([r0, r1].map((r) => r.next((f) => f.type === 'lease')));
  const res = await fetch(`${first.server.url}/v1/jobs`, { method: 'POST', headers: { authorization: `Bearer ${first.apiKey}`, 'content-type': 'application/json' }, body: JSON.stringify({ kind: LLM, input: { prompt: 'bench', model: MODEL } }) });
  if (res.status !== 202) throw new Error(`submitting the job: ${res.status} ${await res.text()}`);
  await leased;
  return { a: r0, b: r1, pids: which === 'one' ? [first.server.pid] : [first.server.pid, second.pid] };
}

async function relayPath(stoppers: Array<() => Promise<void>>): Promise<Setup> {
  const relay = await startChildServer('bare-frame-relay.ts', {});
  stoppers.push(() => relay.stop());
  const a = await RelayPeer.connect(relay.url, 'a');
  const b = await RelayPeer.connect(relay.url, 'b');
  stoppers.push(async () => (a.close(), b.close()));
  return { a, b, pids: [relay.pid] };
}

export default async function ranks(args: string[]): Promise<number> {
  const o = parseOptions(args);
  const { prefix, dataDir, stoppers, cleanup } = await benchScratch('ranks', REDIS_URL);
  const log = (m: string) => o.json || console.error(m);
  const meter = new CpuMeter(REDIS_URL);
  // Instances sharing a store must share the tool secret key (docs/deploy.md).
  const base = { redisUrl: REDIS_URL, dataDir, profileDir: o.profileDir, env: { TOOL_SECRET_KEY: randomBytes(32).toString('base64'), SHUTDOWN_DRAIN_MS: '0' } };
  const streams: StreamRow[] = [];
  const latencies: LatencyRow[] = [];
  try {
    const machine = await describeMachine(REDIS_URL);
    log(`ranks: ${o.paths.map((p) => PATH_LABEL[p]).join(', ')}; ${o.sizes.map((s) => `${o.mb} MB in ${fmt(s / KiB)} KiB frames`).join(', ')}; ${o.rounds} round trips of ${o.latencySizes.map((s) => `${s} B`).join(', ')}`);
    // Every path is set up first and the cases then take turns, so a busy moment of a shared
    // machine falls on all paths alike rather than on whichever ran then.
    const setups = new Map<PathName, Setup>();
    for (const p of o.paths) setups.set(p, p === 'relay' ? await relayPath(stoppers) : await gatewayPath(p, { ...base, prefix: `${prefix}:${p}` }, stoppers));
    for (const size of o.sizes) {
      for (const [p, setup] of setups) {
        log(`  ${PATH_LABEL[p]}: ${o.mb} MB in ${fmt(size / KiB)} KiB frames`);
        streams.push(await measureStream(PATH_LABEL[p], setup, size, o, meter));
      }
    }
    for (const size of o.latencySizes) {
      for (const [p, setup] of setups) {
        log(`  ${PATH_LABEL[p]}: ${o.rounds} round trips of ${size} B`);
        latencies.push(await measureLatency(PATH_LABEL[p], setup, size, o, meter));
      }
    }
    for (const stop of stoppers.splice(0).reverse()) await stop();
    if (o.json) console.log(JSON.stringify({ machine, options: o, streams, latencies }, null, 2));
    else {
      console.log(`\nmachine: ${machine.cpus} cores (${machine.cpuModel}), Node ${machine.node}, Redis ${machine.redis}`);
      console.log(report(o, streams, latencies));
    }
    return 0;
  } finally {
    meter.close();
    await cleanup();
  }
}

function report(o: Options, streams: StreamRow[], latencies: LatencyRow[]): string {
  const size = (b: number) => (b >= KiB ? `${fmt(b / KiB)} KiB` : `${b} B`);
  const msPerMb = (us: number, r: StreamRow) => us / 1000 / ((r.frames * r.payload) / MB);
  const perMb = (us: number, r: StreamRow) => fmt(msPerMb(us, r), 2);
  const bare = (rows: Array<StreamRow | LatencyRow>, payload: number) => rows.find((r) => r.path === PATH_LABEL.relay && r.payload === payload);
  const out: string[] = [];
  out.push(`throughput: rank 0 streams ${o.mb} MB (10^6 bytes of payload) to rank 1, at most ${fmt(o.capBytes / KiB / KiB, 2)} MiB waiting in its socket; CPU in ms per MB`);
  out.push(
    table(
      ['path', 'payload', 'MB/s', 'of bare', 'frames/s', 'server ms/MB', 'main thread', 'added ms/MB', 'Redis ms/MB', 'clients ms/MB', 'busy cores', 'other cores'],
      streams.map((r) => {
        const b = bare(streams, r.payload) as StreamRow | undefined;
        const c = r.cpu;
        const added = b && r !== b ? fmt(msPerMb(c.serverUs + c.redisUs, r) - msPerMb(b.cpu.serverUs + b.cpu.redisUs, b), 2) : '-';
        const other = (c.machineBusyUs - c.serverUs - c.redisUs - c.clientsUs) / c.wallUs;
        return [r.path, size(r.payload), fmt(r.mbPerSec), b ? `${fmt((r.mbPerSec / b.mbPerSec) * 100)}%` : '-', fmt(r.frames / r.seconds), perMb(c.serverUs, r), perMb(c.serverMainUs, r), added, perMb(c.redisUs, r), perMb(c.clientsUs, r), fmt(c.machineBusyUs / c.wallUs, 2), fmt(other, 2)];
      }),
    ),
  );
  out.push('(server: the relay, the gateway, or both gateways summed, all threads; main thread: theirs alone; added: server + Redis over the bare relay\'s (Redis there: other users);');
  out.push(' clients: this process, both rank workers; other cores: busy time none of these account for)');
  out.push('');
  out.push(`latency: ${o.rounds} sequential round trips, rank 0 -> rank 1 -> rank 0; per hop = round trip / 2, µs`);
  out.push(
    table(
      ['path', 'payload', 'hop p50 µs', 'hop p99 µs', 'added p50 µs', 'added p99 µs', 'server µs/hop', 'Redis µs/hop', 'clients µs/hop'],
      latencies.map((r) => {
        const b = bare(latencies, r.payload) as LatencyRow | undefined;
        const hops = r.rounds * 2;
        const isBare = r.path === PATH_LABEL.relay;
        return [r.path, size(r.payload), fmt(r.hopP50Us), fmt(r.hopP99Us), b && !isBare ? fmt(r.hopP50Us - b.hopP50Us) : '-', b && !isBare ? fmt(r.hopP99Us - b.hopP99Us) : '-', fmt(r.cpu.serverUs / hops, 1), fmt(r.cpu.redisUs / hops, 1), fmt(r.cpu.clientsUs / hops, 1)];
      }),
    ),
  );
  out.push('(server µs/hop: CPU of the relay or gateway(s) per frame carried; /proc counts in 10 ms ticks, so short windows are coarse)');
  return out.join('\n');
}
