import { fmt, table } from './report.js';
import { GOAL_KB_PER_STREAM, GOAL_P99_MS, GOAL_RATIO, type SseOptions } from './sse-options.js';

/** What the SSE benchmark measures of each server (bench/sse.ts), and its report. */

export interface Memory {
  rss: number;
  /** V8 heap: live objects, and what V8 holds from the system for it. */
  heapUsed: number;
  heapTotal: number;
  /** Buffers and other memory outside the V8 heap that V8 knows of. */
  external: number;
}

export interface Cpu {
  /** The server child, all threads / its main thread (its event loop). */
  serverUs: number;
  serverMainThreadUs: number;
  clientsUs: number;
  /** This process: the publisher (and the polling of the clients' counts). */
  publisherUs: number;
  redisUs: number;
  redisMainThreadUs: number;
  busyCores: number;
  seconds: number;
}

export interface Phase {
  name: string;
  streams: number;
  open: { seconds: number; perSec: number };
  memory: {
    before: Memory;
    /** 2 s after the last stream opened, after a forced GC. */
    after: Memory;
    /** Once V8's memory reducer has shrunk the heap (seconds: since the last stream opened). */
    settled: Memory & { seconds: number };
    rssPerStreamKb: number;
    heapPerStreamKb: number;
    heapTotalPerStreamKb: number;
    settledRssPerStreamKb: number;
    settledHeapTotalPerStreamKb: number;
    heapSnapshots?: string[];
  };
  latency: { rate: number; events: number; frames: number; missing: number; p50Ms: number; p90Ms: number; p99Ms: number; maxMs: number; cpu: Cpu };
  max: { eventsPerSec: number; framesPerSec: number; seconds: number; missing: number; cpu: Cpu };
  outOfOrder: number;
  closedByServer: number;
  publishErrors: number;
}


const mb = (bytes: number) => fmt(bytes / 1048576, 1);
const ms = (v: number) => fmt(v, 2);
const pct = (r: number) => `${(r * 100).toFixed(1)}%`;

/** CPU per received frame over a window: where the work went. */
function cpuRow(name: string, c: Cpu, frames: number): string[] {
  const per = (us: number) => fmt(us / frames, 2);
  const listedCores = (c.serverUs + c.clientsUs + c.publisherUs + c.redisUs) / (c.seconds * 1e6);
  return [name, fmt(frames / c.seconds), per(c.serverUs), per(c.serverMainThreadUs), per(c.clientsUs), per(c.publisherUs), per(c.redisUs), fmt(c.busyCores, 2), fmt(c.busyCores - listedCores, 2)];
}

export function report(o: SseOptions, phases: Phase[], ratio: number, goals: Record<string, boolean>): string {
  const [gw] = phases;
  const out = [
    `${fmt(o.connections)} SSE streams over ${fmt(o.runs)} runs (${fmt(o.connections / o.runs, 1)} per run), clients in ${o.clientProcesses} process(es)`,
    '',
    'idle streams: growth per stream of RSS and of the V8 heap (used, and committed), each read after a forced GC,',
    'from before opening to 2 s after the last stream opened, and to once V8\'s memory reducer has run ("settled")',
    table(
      ['server', 'streams', 'open s', 'opened/s', 'RSS before MB', 'RSS KB/stream', 'heap used', 'heap total', 'settled after s', 'RSS KB/stream', 'heap total'],
      phases.map((p) => {
        const m = p.memory;
        const kb = (v: number) => fmt(v, 1);
        return [p.name, fmt(p.streams), fmt(p.open.seconds, 1), fmt(p.open.perSec), mb(m.before.rss), kb(m.rssPerStreamKb), kb(m.heapPerStreamKb), kb(m.heapTotalPerStreamKb), fmt(m.settled.seconds, 1), kb(m.settledRssPerStreamKb), kb(m.settledHeapTotalPerStreamKb)];
      }),
    ),
    '',
    `delivery latency, publish -> client receive, at ${fmt(o.rate)} events/s for ${o.duration} s`,
    table(
      ['server', 'events', 'frames', 'missing', 'p50 ms', 'p90 ms', 'p99 ms', 'max ms'],
      phases.map((p) => [p.name, fmt(p.latency.events), fmt(p.latency.frames), fmt(p.latency.missing), ms(p.latency.p50Ms), ms(p.latency.p90Ms), ms(p.latency.p99Ms), ms(p.latency.maxMs)]),
    ),
    '',
    `throughput, published as fast as the clients receive (<= ${fmt(o.window)} frames in flight), ${o.maxDuration} s`,
    table(
      ['server', 'events/s', 'frames/s', 's', 'missing'],
      phases.map((p) => [p.name, fmt(p.max.eventsPerSec), fmt(p.max.framesPerSec), fmt(p.max.seconds, 1), fmt(p.max.missing)]),
    ),
    '',
    'CPU per received frame, µs (Redis is shared: its figures include anything else it served)',
    table(
      ['window', 'frames/s', 'server', 'its main thread', 'clients', 'publisher', 'Redis', 'busy cores', 'other cores'],
      phases.flatMap((p) => [
        cpuRow(`${p.name}, ${fmt(o.rate)} ev/s`, p.latency.cpu, p.latency.frames),
        cpuRow(`${p.name}, max`, p.max.cpu, p.max.framesPerSec * p.max.cpu.seconds),
      ]),
    ),
    '(publisher: this process, appending through RunEventLog.append; clients: the client process(es);',
    ' other cores: machine busy time none of these account for — other programs, the idle server\'s pings, kernel work)',
  ];
  for (const p of phases) {
    const bad = [p.outOfOrder && `${fmt(p.outOfOrder)} frames out of order`, p.closedByServer && `${fmt(p.closedByServer)} streams closed by the server`, p.publishErrors && `${fmt(p.publishErrors)} failed appends`].filter(Boolean);
    if (bad.length) out.push(`${p.name}: ${bad.join(', ')}`);
    if (p.memory.heapSnapshots) out.push(`${p.name}: heap snapshots before and after opening: ${p.memory.heapSnapshots.join(' ')}`);
  }
  const verdict = (met: boolean) => (met ? 'met' : 'NOT met');
  out.push(
    '',
    `gateway / bare frames/s: ${pct(ratio)}`,
    `goal p99 <= ${GOAL_P99_MS} ms: gateway ${ms(gw.latency.p99Ms)} ms: ${verdict(goals.p99)}`,
    `goal <= ${GOAL_KB_PER_STREAM} KB RSS per idle stream: gateway ${fmt(gw.memory.settledRssPerStreamKb, 1)} KB settled: ${verdict(goals.rss)} (${fmt(gw.memory.rssPerStreamKb, 1)} KB 2 s after opening: ${verdict(gw.memory.rssPerStreamKb <= GOAL_KB_PER_STREAM)})`,
    `goal >= ${pct(GOAL_RATIO)} of the bare fan-out's frames/s: ${verdict(goals.ratio)}`,
  );
  return out.join('\n');
}

