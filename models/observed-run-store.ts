import type { GateCheck, NewRun, RunRecord } from './types.js';
import type { CreateRunResult, GatedCreateResult, ListRunsQuery, RunStore, RunTransition, TransitionResult } from './stores.js';

/**
 * Called after a transition that set a status (`to`) succeeded, with the record as it now is.
 * A listener handles its own errors: the transition has happened whatever it does.
 */
export type RunStatusListener = (run: RunRecord) => Promise<void> | void;

/**
 * A RunStore that tells listeners about every status change, whichever code made it. The
 * event log and webhooks hang off this one place instead of every caller of `transition`.
 */
export class ObservedRunStore implements RunStore {
  private readonly listeners: RunStatusListener[] = [];

  constructor(private readonly inner: RunStore) {
    if (inner.createGated) this.createGated = (run, gate) => inner.createGated!(run, gate);
  }

  onStatusChange(listener: RunStatusListener): void {
    this.listeners.push(listener);
  }

  create(run: NewRun): Promise<CreateRunResult> {
    return this.inner.create(run);
  }

  /** Present exactly when the inner store has it: a creation sets no status, so nothing to observe. */
  readonly createGated?: (run: NewRun, gate: GateCheck) => Promise<GatedCreateResult>;

  get(runId: string): Promise<RunRecord | null> {
    return this.inner.get(runId);
  }

  list(accountId: string, query: ListRunsQuery) {
    return this.inner.list(accountId, query);
  }

  async transition<T extends RunTransition>(run: Pick<RunRecord, 'run_id' | 'account_id'>, t: T): Promise<TransitionResult<T>> {
    // The listeners need the record of a status change: a lean reply is not asked for then (the type forbids it anyway).
    const asked = t.to !== undefined && (t.returning as string | undefined) === 'none' ? { ...t, returning: 'record' as const } : t;
    const result = await this.inner.transition(run, asked);
    if (result.ok && t.to && result.run && this.listeners.length) {
      // Awaited, so whoever made the change (and answers a worker or caller next) knows the
      // event is logged and the webhook queued before it says so.
      // Each listener is called now (the event log queues the event at once, so the run's later
      // events come after it) and handles its own errors.
      const changed = result.run;
      const told = Promise.all(this.listeners.map(async (l) => l(changed)));
      if (t.awaitListeners === false) told.catch(() => {});
      else await told;
    }
    return result as TransitionResult<T>;
  }

  listUnconfirmed(olderThanMs: number, limit: number): Promise<RunRecord[]> {
    return this.inner.listUnconfirmed(olderThanMs, limit);
  }

  confirmEnqueued(runIds: string[]): Promise<void> {
    return this.inner.confirmEnqueued(runIds);
  }
}
