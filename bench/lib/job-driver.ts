import { createHistogram, type RecordableHistogram } from 'node:perf_hooks';
import type { ChildServer } from './child-server.js';
import type { WorkerFleet } from './worker-fleet.js';

/** Wall-clock ms, the clock the worker fleet stamps its events with. */
export const now = () => performance.timeOrigin + performance.now();

/** Percentile in ms of a histogram recorded in µs (recordMs); NaN when empty. */
export const pct = (h: RecordableHistogram, p: number) => (h.count ? h.percentile(p) / 1e3 : NaN);
export const recordMs = (h: RecordableHistogram, ms: number) => h.record(Math.max(1, Math.round(ms * 1000)));

/** POST with the admin token, expecting 201 (accounts, operators). */
export async function adminPost<T>(server: ChildServer, adminToken: string, route: string, body: unknown): Promise<T> {
  const res = await fetch(`${server.url}${route}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${adminToken}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  if (res.status !== 201) throw new Error(`${route} failed: ${res.status} ${await res.text()}`);
  return (await res.json()) as T;
}

/** One open-loop submission: when it was sent, when its answer came, and its run id (none on a non-202 or error). */
export interface Sent {
  runId?: string;
  sentAt: number;
  acceptedAt: number;
}

/** The submission body of the n-th job. */
export type JobBody = (n: number) => { kind: string; input: Record<string, unknown> };

/** Submits and follows runs; leases and completion come from the worker process's lines. */
export class Driver {
  private readonly waiting = new Map<string, () => void>();
  private readonly early = new Set<string>();
  readonly leases = new Map<string, number>();
  readonly completedIds: string[] = [];
  failures: string[] = [];
  non202 = 0;
  errors = 0;
  trackLeases = false;

  constructor(
    private readonly url: string,
    /** One account's key, or several that submissions take in turn (a load of many accounts). */
    private readonly apiKey: string | string[],
    fleet: WorkerFleet,
    private readonly body: JobBody,
  ) {
    fleet.events.onCompleted = (runId) => {
      if (this.completedIds.length < 100_000) this.completedIds.push(runId);
      const done = this.waiting.get(runId);
      if (done) {
        this.waiting.delete(runId);
        done();
      } else this.early.add(runId); // the ack beat our 202
    };
    fleet.events.onLease = (runId, at) => {
      if (this.trackLeases) this.leases.set(runId, at);
    };
    fleet.events.onFailed = (runId, why) => {
      this.failures.push(`${runId} ${why}`);
      const done = this.waiting.get(runId);
      if (done) {
        this.waiting.delete(runId);
        done();
      }
    };
  }

  private keyFor(n: number): string {
    const keys = this.apiKey;
    return typeof keys === 'string' ? keys : keys[Math.abs(n) % keys.length]!;
  }

  /** POST /v1/jobs; the run id, or undefined on a non-202 or error. */
  async submit(n: number): Promise<string | undefined> {
    try {
      const res = await fetch(`${this.url}/v1/jobs`, {
        method: 'POST',
        headers: { authorization: `Bearer ${this.keyFor(n)}`, 'content-type': 'application/json' },
        body: JSON.stringify(this.body(n)),
      });
      const body = (await res.json()) as { run_id?: string };
      if (res.status !== 202 || !body.run_id) {
        this.non202++;
        return undefined;
      }
      return body.run_id;
    } catch {
      this.errors++;
      return undefined;
    }
  }

  completion(runId: string): Promise<void> {
    if (this.early.delete(runId)) return Promise.resolve();
    return new Promise((resolve) => this.waiting.set(runId, resolve));
  }

  /** `concurrency` runs in the system at all times: each loop submits, waits for `succeeded`, repeats. */
  async closedLoop(seconds: number, concurrency: number) {
    const latency = createHistogram();
    let jobs = 0;
    let n = 0;
    const start = performance.now();
    const until = start + seconds * 1000;
    const loop = async () => {
      while (performance.now() < until) {
        const sent = performance.now();
        const runId = await this.submit(n++);
        if (!runId) continue;
        await this.completion(runId);
        recordMs(latency, performance.now() - sent);
        jobs++;
      }
    };
    await Promise.all(Array.from({ length: concurrency }, loop));
    return { jobs, seconds: (performance.now() - start) / 1000, latency };
  }

  /**
   * Open loop: `total` submissions, one every 1/rate s whatever the answers do (jobs numbered
   * from `first`); then waits up to `settleMs` for every accepted run to succeed.
   */
  async openLoop(rate: number, total: number, first: number, settleMs = 10_000): Promise<Sent[]> {
    const sends: Array<Promise<Sent>> = [];
    const t0 = performance.now();
    for (let i = 0; i < total; i++) {
      const due = t0 + (i * 1000) / rate;
      const wait = due - performance.now();
      if (wait > 0) await new Promise((res) => setTimeout(res, wait));
      const sentAt = now();
      sends.push(this.submit(first + i).then((runId) => ({ runId, sentAt, acceptedAt: now() })));
    }
    const sent = await Promise.all(sends);
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      Promise.all(sent.filter((s) => s.runId).map((s) => this.completion(s.runId!))),
      new Promise((res) => (timer = setTimeout(res, settleMs))),
    ]);
    clearTimeout(timer);
    return sent;
  }
}
