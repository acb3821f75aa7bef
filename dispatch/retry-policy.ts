import { parseQueueName } from '../queues/queue-names.js';
import type { ConnectedWorker } from './connected-worker.js';
import type { FleetCounters } from './fleet-counters.js';
import { availableServing } from './fleet-snapshot.js';

export interface RetryPolicyOptions {
  fleet: Pick<FleetCounters, 'read'>;
  /** The backoff after a first attempt; doubles with each attempt. @defaultValue 1000 */
  firstDelayMs?: number;
  /** @defaultValue 30000 */
  maxDelayMs?: number;
}

/** How a retry goes back to its queue: now, with the failing worker cooling off it, or after a delay. */
export type RetryPlan = { kind: 'elsewhere'; coolOffMs: number } | { kind: 'delayed'; delayMs: number };

/**
 * Where a retryable attempt goes (docs/architecture.md, "Retries"). A worker's retryable
 * failure says something about that worker as much as about the job: an engine out of memory,
 * a backend that just died. So the retry prefers another worker, and when the fleet has none
 * that could take it, it waits before the failing worker tries again. Either way the attempts
 * are not spent in milliseconds on one broken worker. The wait doubles with each attempt.
 */
export class RetryPolicy {
  constructor(private readonly opts: RetryPolicyOptions) {}

  /** The wait after the failed `attempt` (1-based). */
  backoffMs(attempt: number): number {
    const first = this.opts.firstDelayMs ?? 1_000;
    return Math.min(first * 2 ** Math.max(0, attempt - 1), this.opts.maxDelayMs ?? 30_000);
  }

  /**
   * `attempt` of a job of `queue` failed on `worker`. Another worker that could take it (any
   * instance; of the job's tier or stronger; serving its model; backend answering): the job
   * goes back to its queue at once and `worker` leaves that queue alone for the backoff.
   * Otherwise the job itself waits out the backoff. A fleet that cannot be read counts as none.
   */
  async plan(worker: ConnectedWorker, queue: string, attempt: number): Promise<RetryPlan> {
    const wait = this.backoffMs(attempt);
    const at = parseQueueName(queue);
    if (!at || wait === 0) return { kind: 'elsewhere', coolOffMs: wait };
    const fleet = await this.opts.fleet.read().catch(() => null);
    const kind = fleet?.kinds[at.kind];
    const counts = at.model ? kind?.models[at.model] : kind;
    // The failing worker is among the fleet's counts unless its backend is down.
    const others = counts ? availableServing(counts, at.tier) - (worker.info.backend_down ? 0 : 1) : 0;
    return others > 0 ? { kind: 'elsewhere', coolOffMs: wait } : { kind: 'delayed', delayMs: wait };
  }
}
