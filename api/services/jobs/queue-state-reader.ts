import type { FleetCounters } from '../../../dispatch/fleet-counters.js';
import type { RunRecord } from '../../../models/types.js';
import type { JobQueues } from '../../../queues/job-queues.js';
import { waitingReason, type ModelGate, type WaitingReason } from './model-gate.js';

/** Where a queued run stands: its place in its queue, and why it waits when the fleet says why. */
export interface QueueState {
  position: number | null;
  waiting_reason: WaitingReason | null;
  /** With `no_worker_for_rank`: the ranks no worker could hold now, 0-based, ascending; null otherwise. */
  waiting_ranks: number[] | null;
}

export interface QueueStateReaderOptions {
  queues: Pick<JobQueues, 'places'>;
  models: Pick<ModelGate, 'ranked'>;
  fleet?: Pick<FleetCounters, 'read'>;
  dispatch?: { gate?: { parked(runIds: string[]): Promise<boolean[]> } };
}

/** Where queued runs stand and why they wait, for the job object (JobService.queueState). */
export class QueueStateReader {
  constructor(private readonly opts: QueueStateReaderOptions) {}

  /**
   * Where each run stands (a page of a listing): the places of its queued runs in one round
   * trip (JobQueues.places), the fleet read once, and each ranked model's catalogue entry from
   * the gate's cache. Nothing is read for a page with no queued run.
   */
  async read(runs: RunRecord[]): Promise<Array<QueueState | null>> {
    const queued = runs.filter((r) => r.status === 'queued');
    if (queued.length === 0) return runs.map(() => null);
    // The catalogue entry (cached by the gate) says whether the run waits for a pipeline of ranks.
    const [places, fleet, ranked, parked] = await Promise.all([
      this.opts.queues.places(queued),
      this.opts.fleet?.read(),
      Promise.all(queued.map((r) => this.opts.models.ranked(r))),
      this.opts.dispatch?.gate?.parked(queued.map((r) => r.run_id)),
    ]);
    const now = Date.now();
    const states = new Map<RunRecord, QueueState>();
    queued.forEach((run, i) => {
      const place = places[i];
      // Parked at a concurrency limit (dispatch/concurrency-gate.ts): it waits for a run of its account, key or kind to end.
      if (parked?.[i]) {
        states.set(run, { position: null, waiting_reason: 'concurrency_limit', waiting_ranks: null });
        return;
      }
      // A retry waiting out its backoff (docs/architecture.md, "Retries") has no place in the queue
      // yet; once the backoff is over it waits for a worker like any job (the next fetch moves it).
      if (place.delayedUntil !== null && place.delayedUntil > now) {
        states.set(run, { position: null, waiting_reason: 'retry_backoff', waiting_ranks: null });
        return;
      }
      const waiting = fleet ? waitingReason(run, fleet, ranked[i]) : { reason: null, ranks: null };
      states.set(run, { position: place.position, waiting_reason: waiting.reason, waiting_ranks: waiting.ranks });
    });
    return runs.map((r) => states.get(r) ?? null);
  }
}
