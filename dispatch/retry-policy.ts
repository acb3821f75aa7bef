import type { Job } from 'bullmq';
import type { Logger } from 'pino';
import type { RunError } from '../models/types.js';
import type { QueuedJobData } from '../queues/job-queues.js';
import { parseQueueName } from '../queues/queue-names.js';
import { isLockLost } from './bull-workers.js';
import type { ConnectedWorker } from './connected-worker.js';
import type { FleetCounters } from './fleet-counters.js';
import { availableServing } from './fleet-snapshot.js';

export interface RetryPolicyOptions {
  fleet: Pick<FleetCounters, 'read'>;
  log: Logger;
  /** A job went back to its queue: every instance may lease it. */
  announce(queue: string): Promise<void>;
  /** A job was put back delayed until `at`: announced then. */
  announceAt(queue: string, at: number): void;
  /** The worker leaves `queue` to the others for `ms`. */
  coolOff(worker: ConnectedWorker, queue: string, ms: number): void;
  /** The backoff after a first attempt; doubles with each attempt. @defaultValue 1000 */
  firstDelayMs?: number;
  /** @defaultValue 30000 */
  maxDelayMs?: number;
}

/** The lease whose attempt is retried, as the retry needs it: its BullMQ job and lock, worker, queue and attempt. */
export interface RetriedLease {
  runId: string;
  job: Job<QueuedJobData>;
  token: string;
  worker: ConnectedWorker;
  queue: string;
  fence: number;
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

  /**
   * Puts the job of a lease whose attempt failed back in its queue, its run already `queued`. A
   * failure its worker `reported` goes by `plan`; a lost worker's job goes back at once.
   */
  async requeue(lease: RetriedLease, error: RunError, reported: boolean): Promise<void> {
    const plan = reported ? await this.plan(lease.worker, lease.queue, lease.fence) : null;
    try {
      if (plan?.kind === 'delayed') {
        const at = Date.now() + plan.delayMs;
        await lease.job.moveToDelayed(at, lease.token);
        this.opts.log.info({ runId: lease.runId, code: error.code, delayMs: plan.delayMs }, 'retry delayed: no other worker could take it');
        this.opts.announceAt(lease.queue, at);
        return;
      }
      if (plan && plan.coolOffMs > 0) this.opts.coolOff(lease.worker, lease.queue, plan.coolOffMs);
      await lease.job.moveToFailed(new Error(`${error.code}: ${error.message}`), lease.token, false);
    } catch (err) {
      // Lock gone: the stalled checker requeues the job instead.
      if (!isLockLost(err)) throw err;
    }
    await this.opts.announce(lease.queue);
  }
}
