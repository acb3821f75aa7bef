import fc from 'fast-check';
import { answerViolation } from './answer-invariants.js';
import { FuzzWorld } from './fuzz-world.js';
import { operationRequests, operationsOf, type Operation } from './operation-requests.js';
import { closeSockets, sendRaw, type FuzzRequest } from './raw-http.js';

export interface FuzzOptions {
  requests: number;
  seed: number;
  /** Only these operations (replaying one failure). */
  only?: string[];
  /** How far the gateway's RSS may end above where it stood after the warm-up, in MB. */
  rssBoundMb: number;
  /** A request with no answer within this is a violation. */
  timeoutMs: number;
  log?: (line: string) => void;
}

export interface OperationStats {
  operationId: string;
  method: string;
  path: string;
  requests: number;
  statuses: Map<number, number>;
  failures: number;
}

export interface FuzzReport {
  seed: number;
  requests: number;
  seconds: number;
  stats: OperationStats[];
  violations: string[];
  rss: { startMb: number; peakMb: number; endMb: number; boundMb: number };
  /** V8 heap in use after the warm-up and at the end (reported, not bounded: RSS is). */
  heap: { startMb: number; endMb: number };
  /** Operations the fuzzer sends requests to but cannot reach past their credential check, and why. */
  limited: Record<string, string>;
}

/**
 * Operations whose success path the fuzzer cannot reach, said rather than skipped: their
 * requests are still sent (every one must still get a documented 4xx), but a valid credential
 * is a lease's upload token or worker-facing token only a connected worker holds.
 */
export const LIMITED: Record<string, string> = {
  uploadArtifact: 'needs a lease upload token, which only a worker holding a lease gets: fuzzed with none or wrong ones (401/404 paths)',
  getLeaseInputFile: 'needs a lease and its worker token: fuzzed with none or wrong ones',
  createChatCompletion: 'no llm worker is connected: a valid request ends in the documented 503 unavailable',
  invokeBot: 'no llm worker is connected: a valid invocation ends in the documented 503 unavailable',
};

/** The request as a failure report shows it (the body as text, or base64 when it is not UTF-8). */
export function describeRequest(req: FuzzRequest): string {
  const body = req.body;
  let shown = '(none)';
  if (body) {
    const text = body.toString('utf8');
    const utf8 = Buffer.from(text, 'utf8').equals(body);
    shown = `${body.length} bytes, ${utf8 ? 'utf8' : 'base64'}: ${(utf8 ? text : body.toString('base64')).slice(0, 1500)}${body.length > 1500 ? '...' : ''}`;
  }
  return `${req.method} ${req.path.slice(0, 1500)}\n  headers: ${JSON.stringify(req.headers).slice(0, 1500)}\n  body: ${shown}\n  made as: ${req.variant.join(', ')}`;
}

/** Runs the fuzzer against a fresh gateway process and returns what it saw. */
export async function runFuzz(opts: FuzzOptions): Promise<FuzzReport> {
  const log = opts.log ?? (() => {});
  const world = await new FuzzWorld().start();
  const violations: string[] = [];
  const started = Date.now();
  let peak = 0;
  const sampler = setInterval(() => {
    try {
      peak = Math.max(peak, world.rssMb());
    } catch {
      // the gateway exited: the next request says so
    }
  }, 200);
  try {
    const ops = operationsOf(world.doc).filter((o) => !opts.only || opts.only.includes(o.operationId));
    if (!ops.length) throw new Error(`no operation matches ${opts.only?.join(', ')}`);
    const stats = new Map(ops.map((o) => [o.operationId, { operationId: o.operationId, method: o.method, path: o.path, requests: 0, statuses: new Map<number, number>(), failures: 0 }]));
    const send = async (o: Operation, req: FuzzRequest): Promise<string | null> => {
      const s = stats.get(o.operationId)!;
      s.requests++;
      try {
        const res = await sendRaw(world.url, req, opts.timeoutMs);
        s.statuses.set(res.status, (s.statuses.get(res.status) ?? 0) + 1);
        return answerViolation(o, req.method, res);
      } catch (err) {
        s.statuses.set(0, (s.statuses.get(0) ?? 0) + 1);
        return `no answer: ${(err as Error).message}`;
      }
    };

    // Warm-up: a few requests of each operation, so the start figure of RSS is that of a gateway
    // whose code paths have all run once, not of one that has not loaded them yet.
    for (const [i, o] of ops.entries()) for (const req of fc.sample(operationRequests(o, world), { seed: opts.seed + i, numRuns: 3 })) await send(o, req);
    for (const s of stats.values()) (s.requests = 0), s.statuses.clear();
    const startMb = await settledRss(world);
    const heapStartMb = await world.heapUsedMb();
    log(`gateway pid ${world.pid}, RSS after warm-up ${startMb.toFixed(1)} MB; ${ops.length} operations`);

    let before = await world.snapshotB();
    const perOp = Math.max(1, Math.ceil(opts.requests / ops.length));
    for (const [i, o] of ops.entries()) {
      const seed = (opts.seed + i * 7919) | 0;
      const result = await fc.check(
        fc.asyncProperty(operationRequests(o, world), async (req) => {
          const violation = await send(o, req);
          if (violation) throw new Error(violation);
        }),
        { seed, numRuns: perOp },
      );
      if (result.failed) {
        stats.get(o.operationId)!.failures++;
        const req = result.counterexample?.[0] as FuzzRequest | undefined;
        violations.push(
          `${o.operationId} (${o.method} ${o.path}): ${(result.errorInstance as Error)?.message ?? result.failed}\n` +
            `  replay: npm run fuzz -- --seed ${opts.seed} --only ${o.operationId}   (fast-check seed ${seed}, path ${result.counterexamplePath}, shrunk ${result.numShrinks} times)\n` +
            `  ${req ? describeRequest(req) : '(no counterexample)'}`,
        );
      }
      if (world.gateway.child.exitCode !== null || world.gateway.child.signalCode !== null) {
        violations.push(`the gateway exited during ${o.operationId}: ${world.gateway.child.exitCode ?? world.gateway.child.signalCode}`);
        break;
      }
      const after = await world.snapshotB();
      if (after !== before) violations.push(`${o.operationId} changed account B's data (requests carried A's key, the admin token or none):\n${firstDifference(before, after)}`);
      before = after; // so the next operation is judged on what it changes, not on this one's change

      await world.restoreA();
      log(`${o.operationId}: ${stats.get(o.operationId)!.requests} requests; RSS ${world.rssMb().toFixed(1)} MB, heap used ${(await world.heapUsedMb()).toFixed(1)} MB`);
    }

    const endMb = await settledRss(world);
    const heapEndMb = await world.heapUsedMb();
    if (endMb - startMb > opts.rssBoundMb) violations.push(`the gateway's RSS grew from ${startMb.toFixed(1)} MB to ${endMb.toFixed(1)} MB, past the bound of +${opts.rssBoundMb} MB`);
    const requests = [...stats.values()].reduce((n, s) => n + s.requests, 0);
    return { seed: opts.seed, requests, seconds: (Date.now() - started) / 1000, stats: [...stats.values()], violations, rss: { startMb, peakMb: peak, endMb, boundMb: opts.rssBoundMb }, heap: { startMb: heapStartMb, endMb: heapEndMb }, limited: LIMITED };
  } finally {
    clearInterval(sampler);
    closeSockets();
    await world.stop();
  }
}

/**
 * The gateway's RSS once it is idle: the least of samples over two seconds, so a collection
 * that has not run yet does not count as growth.
 */
async function settledRss(world: FuzzWorld): Promise<number> {
  let least = Infinity;
  for (let i = 0; i < 10; i++) {
    least = Math.min(least, world.rssMb());
    await new Promise((r) => setTimeout(r, 200));
  }
  return least;
}

/** The first lines where two snapshots differ. */
function firstDifference(a: string, b: string): string {
  const al = a.split('\n');
  const bl = b.split('\n');
  const i = al.findIndex((line, n) => line !== bl[n]);
  return `  before: ${al.slice(Math.max(0, i - 3), i + 3).join('\n          ')}\n  after:  ${bl.slice(Math.max(0, i - 3), i + 3).join('\n          ')}`;
}

/** The summary table: one row per operation. */
export function summaryTable(report: FuzzReport): string {
  const rows = report.stats.map((s) => [s.operationId, `${s.method} ${s.path}`, String(s.requests), [...s.statuses.entries()].sort((x, y) => x[0] - y[0]).map(([st, n]) => `${st || 'none'}x${n}`).join(' '), String(s.failures)]);
  const head = ['operation', 'route', 'requests', 'statuses seen', 'failures'];
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => Math.min(r[i].length, 60))));
  const line = (r: string[]) => r.map((c, i) => (i === 2 || i === 4 ? c.padStart(widths[i]) : c.padEnd(widths[i]))).join('  ');
  return [line(head), widths.map((w) => '-'.repeat(w)).join('  '), ...rows.map(line)].join('\n');
}
