import type { BatchMember, BatchRecord, CreateBatchResult, NewBatch } from './batch-types.js';
import type { GateCheck, NewRun, RunRecord } from './types.js';
import type { CreateRunResult, GatedCreateResult, ListRunsQuery, RunStore, RunTransition, TransitionResult } from './stores.js';

/**
 * Called after a transition that set a status (`to`) succeeded, with the record as it now is.
 * A listener handles its own errors: the transition has happened whatever it does.
 */
export type RunStatusListener = (run: RunRecord) => Promise<void> | void;

/** The run event log's side of status changes (api/services/events/run-event-writer.ts). */
export interface StatusEventLog {
  /** Resolves once this instance has logged every event of the run it was handed so far. */
  settled(runId: string): Promise<void>;
  /** Logs a status change the store did not log itself. */
  statusChanged: RunStatusListener;
}

/**
 * A RunStore that tells listeners about every status change, whichever code made it. The
 * event log and webhooks hang off this one place instead of every caller of `transition`.
 */
export class ObservedRunStore implements RunStore {
  private readonly listeners: RunStatusListener[] = [];
  private statusLog?: StatusEventLog;

  constructor(private readonly inner: RunStore) {
    if (inner.createGated) this.createGated = (run, gate) => inner.createGated!(run, gate);
  }

  onStatusChange(listener: RunStatusListener): void {
    this.listeners.push(listener);
  }

  /**
   * The event log of status changes. A store that can (Redis: `logsStatusEvents`) logs each
   * change in the transition's own step, one script fewer per change; the run's events handed
   * to the log before it are waited for first, so the log keeps the order this instance was told
   * things in. Otherwise (MongoDB, a record older than that) the log is told as a listener.
   */
  setStatusLog(log: StatusEventLog): void {
    this.statusLog = log;
  }

  get logsStatusEvents(): boolean {
    return false;
  }

  create(run: NewRun): Promise<CreateRunResult> {
    return this.inner.create(run);
  }

  /** Present exactly when the inner store has it: a creation sets no status, so nothing to observe. */
  readonly createGated?: (run: NewRun, gate: GateCheck) => Promise<GatedCreateResult>;

  get(runId: string): Promise<RunRecord | null> {
    return this.inner.get(runId);
  }

  /** A batch's creation sets no status either. */
  createBatch(batch: NewBatch, runs: NewRun[]): Promise<CreateBatchResult> {
    return this.inner.createBatch(batch, runs);
  }

  getBatch(batchId: string): Promise<BatchRecord | null> {
    return this.inner.getBatch(batchId);
  }

  batchMembers(batch: BatchRecord): Promise<BatchMember[]> {
    return this.inner.batchMembers(batch);
  }

  list(accountId: string, query: ListRunsQuery) {
    return this.inner.list(accountId, query);
  }

  async transition<T extends RunTransition>(run: Pick<RunRecord, 'run_id' | 'account_id'>, t: T): Promise<TransitionResult<T>> {
    // The listeners need the record of a status change: a lean reply is not asked for then (the type forbids it anyway).
    let asked: RunTransition = t.to !== undefined && (t.returning as string | undefined) === 'none' ? { ...t, returning: 'record' as const } : t;
    const log = t.to !== undefined ? this.statusLog : undefined;
    if (log && this.inner.logsStatusEvents) {
      await log.settled(run.run_id);
      asked = { ...asked, logStatus: true };
    }
    const result = await this.inner.transition(run, asked);
    if (result.ok && t.to && result.run) {
      const listeners = log && !result.statusLogged ? [log.statusChanged, ...this.listeners] : this.listeners;
      if (listeners.length === 0) return result as TransitionResult<T>;
      // Awaited, so whoever made the change (and answers a worker or caller next) knows the
      // event is logged and the webhook queued before it says so.
      // Each listener is called now (the event log queues the event at once, so the run's later
      // events come after it) and handles its own errors.
      const changed = result.run;
      const told = Promise.all(listeners.map(async (l) => l(changed)));
      if (t.awaitListeners === false) told.catch(() => {});
      else await told;
    }
    return result as TransitionResult<T>;
  }

  get outboxParts(): number | undefined {
    return this.inner.outboxParts;
  }

  listUnconfirmed(olderThanMs: number, limit: number, part?: number): Promise<RunRecord[]> {
    return this.inner.listUnconfirmed(olderThanMs, limit, part);
  }

  confirmEnqueued(runIds: string[]): Promise<void> {
    return this.inner.confirmEnqueued(runIds);
  }
}
