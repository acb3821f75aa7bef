import type { Logger } from 'pino';
import type { RunEventLog } from '../../../models/run-event-log.js';
import type { RunRecord } from '../../../models/types.js';
import { jobView } from '../../contract/presenters.js';
import { RunAppendQueue } from './run-append-queue.js';

/**
 * The event log of each batch (docs/jobs.md, "Batches"): every status change of a run of the
 * batch, as its `status` event with the job, in one log keyed by the batch id (the run event
 * log's stream and channel, the batch id in place of a run id). A batch's stream then follows
 * one channel, however many runs it holds. Its appends go through one group-commit queue per
 * batch: a thousand runs canceled together are a few log calls, not a thousand.
 */
export class BatchEventWriter {
  private readonly queue: RunAppendQueue;

  constructor(
    log: RunEventLog,
    private readonly logger: Logger,
  ) {
    this.queue = new RunAppendQueue(log);
  }

  /** A status listener of the run store (ObservedRunStore.onStatusChange): runs of no batch pass by. */
  statusChanged = async (run: RunRecord): Promise<void> => {
    if (!run.batch_id) return;
    try {
      await this.queue.append(run.batch_id, [{ event: 'status', data: jobView(run) }]);
    } catch (err) {
      // A batch stream re-reads its runs now and then: a lost event delays it, never hangs it.
      this.logger.warn({ err, runId: run.run_id, batchId: run.batch_id }, 'could not log a batch event');
    }
  };
}
