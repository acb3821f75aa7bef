import type { Logger } from 'pino';
import { isDatastoreUnavailable } from '../../../models/errors.js';
import type { DeltaGuard, RunEventLog } from '../../../models/run-event-log.js';
import { isTerminal, type RunRecord } from '../../../models/types.js';
import { jobView } from '../../contract/presenters.js';
import { RunAppendQueue, type NewRunEvent } from './run-append-queue.js';

/** Background retries of a terminal event that could not be logged (about 1 min in all). */
const RETRIES = 6;

/**
 * Turns what happens to a run into logged events. Status changes come from the run store's
 * hook, the rest from workers' frames. A failure to log a status or progress is reported, not
 * thrown: the run's own state has already moved, and a follower always starts from that state.
 * Log lines and output exist nowhere else: when the datastore is unavailable they throw, the
 * worker is told so and sends them again.
 * Every event of a run goes through one group-commit queue, so the log keeps the order in
 * which this instance was told things (a run's last outputs before its final status).
 */
export class RunEventWriter {
  private readonly queue: RunAppendQueue;
  private reported: ((runId: string, event: 'output' | 'logs') => void) | null = null;

  constructor(
    log: RunEventLog,
    private readonly logger: Logger,
    retryDelaysMs?: readonly number[],
  ) {
    this.queue = new RunAppendQueue(log, retryDelaysMs);
  }

  /** Told of each delta and log line once logged (the `output` and `logs` webhooks). */
  onReported(listener: (runId: string, event: 'output' | 'logs') => void): void {
    this.reported = listener;
  }

  /** Resolves once every event of the run handed over so far is logged (or refused). */
  settled(runId: string): Promise<void> {
    return this.queue.settled(runId);
  }

  /** `status` with the whole job; a terminal status is followed by `done`. */
  statusChanged = async (run: RunRecord): Promise<void> => {
    const job = jobView(run);
    await this.append(run.run_id, isTerminal(run.status) ? [{ event: 'status', data: job }, { event: 'done', data: job }] : [{ event: 'status', data: job }]);
  };

  progress(runId: string, progress: number, message?: string): Promise<void> {
    return this.append(runId, [{ event: 'progress', data: message === undefined ? { progress } : { progress, message } }]);
  }

  logLine(runId: string, line: string): Promise<void> {
    return this.appendReported(runId, [{ event: 'log', data: { line, ts: new Date().toISOString() } }], 'logs');
  }

  /**
   * Queues the delta at once (synchronously: call order is log order); resolves once it is
   * logged, or skipped as a copy of one already logged (`guard`: the worker's number for it).
   */
  output(runId: string, delta: string, guard?: DeltaGuard): Promise<void> {
    return this.appendReported(runId, [guard ? { event: 'output', data: { delta }, guard } : { event: 'output', data: { delta } }], 'output');
  }

  private async appendReported(runId: string, events: NewRunEvent[], kind: 'output' | 'logs'): Promise<void> {
    try {
      await this.queue.append(runId, events);
      this.reported?.(runId, kind);
    } catch (err) {
      if (isDatastoreUnavailable(err)) throw err;
      this.logger.warn({ err, runId }, 'could not log a run event');
    }
  }

  private async append(runId: string, events: NewRunEvent[]): Promise<void> {
    try {
      await this.queue.append(runId, events);
    } catch (err) {
      this.logger.warn({ err, runId }, 'could not log a run event');
      // A lost `done` would leave live followers waiting: terminal events are retried in the
      // background (a short Redis outage), progress and output are not worth it.
      if (events.some((e) => e.event === 'done')) this.retry(runId, events, 1);
    }
  }

  private retry(runId: string, events: NewRunEvent[], attempt: number): void {
    if (attempt > RETRIES) return;
    setTimeout(() => {
      this.queue.append(runId, events).then(
        () => this.logger.info({ runId, attempt }, 'logged a run end on retry'),
        () => this.retry(runId, events, attempt + 1),
      );
    }, 500 * 2 ** attempt).unref();
  }
}
