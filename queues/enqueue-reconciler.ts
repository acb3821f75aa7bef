import type { Logger } from 'pino';
import type { RunStore } from '../models/stores.js';
import type { RunRecord } from '../models/types.js';
import type { JobQueues } from './job-queues.js';
import { runsOnReplicas } from './queue-durability.js';

export interface EnqueueReconcilerOptions {
  runs: RunStore;
  queues: JobQueues;
  log: Logger;
  /** Only runs unconfirmed for longer than this are touched (younger ones may be mid-request). @defaultValue 5000 */
  afterMs: number;
  /** @defaultValue afterMs / 2 */
  intervalMs?: number;
  /** @defaultValue 500 */
  batch?: number;
  /**
   * REDIS_WAIT_REPLICAS with queues apart from the runs (a cluster's spread queues): whether a
   * queue's adds reached its replicas. A run whose add did not is left unconfirmed for the next pass.
   */
  queueWrites?: (queue: string) => Promise<boolean>;
  /** Called after a run is added, so dispatchers wake up. */
  onEnqueued?: (run: RunRecord) => Promise<void>;
}

/**
 * The outbox sweeper. A run is recorded as "unconfirmed" atomically with its creation; the
 * submitting request adds it to its queue and confirms it. If the process died in between,
 * any instance's reconciler adds it here. Adding is idempotent (job id = run id) and only
 * runs still `queued` are added, so a run is never queued twice or revived.
 */
export class EnqueueReconciler {
  private timer?: NodeJS.Timeout;
  private running?: Promise<unknown>;

  constructor(private readonly opts: EnqueueReconcilerOptions) {}

  start(): void {
    const every = this.opts.intervalMs ?? Math.max(100, Math.floor(this.opts.afterMs / 2));
    const tick = () => {
      this.running ??= this.sweep()
        .catch((err) => this.opts.log.warn({ err }, 'enqueue reconciliation failed; will retry'))
        .finally(() => (this.running = undefined));
    };
    tick();
    this.timer = setInterval(tick, every);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.running;
  }

  /** The part of an outbox kept in parts (a Redis Cluster's) the next sweep reads. */
  private part = 0;

  /**
   * One pass; returns how many runs it had to enqueue. An outbox kept in parts (a Redis
   * Cluster's, one per account group) is read one part per pass, in turn.
   */
  async sweep(): Promise<{ enqueued: number; confirmed: number }> {
    let enqueued = 0;
    let confirmed = 0;
    const parts = this.opts.runs.outboxParts ?? 1;
    const part = parts > 1 ? this.part++ % parts : undefined;
    for (;;) {
      const pending = await this.opts.runs.listUnconfirmed(this.opts.afterMs, this.opts.batch ?? 500, part);
      if (pending.length === 0) break;
      const added: RunRecord[] = [];
      for (const run of pending) {
        if (run.status === 'queued') {
          await this.opts.queues.add(run);
          added.push(run);
          await this.opts.onEnqueued?.(run);
          enqueued++;
          this.opts.log.info({ runId: run.run_id }, 'enqueued an accepted run that missed its queue write');
        }
      }
      const written = await runsOnReplicas(added, (run) => this.opts.queues.queueOf(run), this.opts.queueWrites);
      const short = new Set(added.filter((r) => !written.has(r.run_id)).map((r) => r.run_id));
      const done = pending.filter((r) => !short.has(r.run_id));
      await this.opts.runs.confirmEnqueued(done.map((r) => r.run_id));
      confirmed += done.length;
      // The rest is listed again by the next pass, not this one (it would list them forever).
      if (short.size > 0) break;
    }
    return { enqueued, confirmed };
  }
}
