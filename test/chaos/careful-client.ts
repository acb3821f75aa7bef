import { randomUUID } from 'node:crypto';
import type { SubmitAttempt } from './history.js';

/** Submission body of the load: the demo engine's image job (a fixed price). */
export const JOB = { kind: 'inference:image:generate', input: { prompt: 'chaos' } };

/**
 * The client of docs/api.md at its most careful: each submission has its own Idempotency-Key,
 * and a network error or a 5xx is retried with the same key, alternating between the gateways'
 * front doors, until a definite answer (a 2xx or a 4xx) or the give-up deadline. Every attempt is
 * recorded. A replay answers the run id of the first acceptance, so a retry whose first try was
 * accepted but whose answer was lost (a gateway killed mid-request) is not a second run.
 */
export class CarefulClient {
  readonly attempts: SubmitAttempt[] = [];
  readonly accepted = new Map<string, number>();
  /** The run ids each Idempotency-Key was answered with: more than one is a second run for one request. */
  readonly runsByKey = new Map<string, Set<string>>();
  private inFlight = new Set<Promise<unknown>>();
  private stopping = false;
  private next = 0;
  unanswered = 0;

  constructor(
    private readonly fronts: string[],
    private readonly apiKey: string,
    private readonly giveUpMs = 60_000,
  ) {}

  /** Starts one submission every `everyMs` until `stop`. */
  startLoad(everyMs: number): void {
    const tick = () => {
      if (this.stopping) return;
      const p = this.submitOne().finally(() => this.inFlight.delete(p));
      this.inFlight.add(p);
      setTimeout(tick, everyMs);
    };
    tick();
  }

  /** Stops starting submissions and waits for those in flight to get their answer. */
  async stop(): Promise<void> {
    this.stopping = true;
    await Promise.all([...this.inFlight]);
  }

  async submitOne(): Promise<string | null> {
    const key = `chaos-${randomUUID()}`;
    let front = this.next++ % this.fronts.length;
    const deadline = Date.now() + this.giveUpMs;
    while (Date.now() < deadline) {
      const attempt: SubmitAttempt = { key, front, at: Date.now(), status: 0 };
      this.attempts.push(attempt);
      try {
        const res = await fetch(`${this.fronts[front]}/v1/jobs`, {
          method: 'POST',
          headers: { authorization: `Bearer ${this.apiKey}`, 'content-type': 'application/json', 'idempotency-key': key },
          body: JSON.stringify(JOB),
          signal: AbortSignal.timeout(10_000),
        });
        attempt.status = res.status;
        const body = (await res.json().catch(() => null)) as { run_id?: string } | null;
        if (res.status === 202 || res.status === 201 || res.status === 200) {
          attempt.runId = body?.run_id;
          if (body?.run_id) this.runsByKey.set(key, (this.runsByKey.get(key) ?? new Set()).add(body.run_id));
          if (body?.run_id && !this.accepted.has(body.run_id)) this.accepted.set(body.run_id, Date.now());
          return body?.run_id ?? null;
        }
        if (res.status < 500) return null; // a definite refusal: retrying the same request cannot change it
      } catch (err) {
        attempt.error = (err as Error).message;
      }
      front = (front + 1) % this.fronts.length;
      await new Promise((r) => setTimeout(r, 200));
    }
    this.unanswered++;
    return null;
  }
}
