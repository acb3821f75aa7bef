import type { Logger } from 'pino';
import type { RunStore } from '../models/stores.js';

/**
 * Confirms queue writes in batches: one store call per few milliseconds instead of one per
 * submission. A confirmation lost to a crash costs nothing but a no-op re-add by the
 * `EnqueueReconciler` (the job id is the run id).
 */
export class EnqueueConfirmer {
  private pending: string[] = [];
  private timer?: NodeJS.Timeout;
  private flushing: Promise<void> = Promise.resolve();

  constructor(
    private readonly runs: RunStore,
    private readonly log: Logger,
    /** @defaultValue 5 */
    private readonly delayMs = 5,
  ) {}

  confirm(runId: string): void {
    this.pending.push(runId);
    this.timer ??= setTimeout(() => void this.flush(), this.delayMs);
  }

  flush(): Promise<void> {
    clearTimeout(this.timer);
    this.timer = undefined;
    const ids = this.pending;
    this.pending = [];
    if (ids.length) {
      this.flushing = this.flushing.then(() =>
        this.runs.confirmEnqueued(ids).catch((err) => this.log.warn({ err, count: ids.length }, 'could not confirm queue writes; the reconciler will')),
      );
    }
    return this.flushing;
  }
}
