import type { Job } from 'bullmq';
import type { RunStore } from '../models/stores.js';
import type { QueuedJobData } from '../queues/job-queues.js';
import type { Tier } from '../models/kinds.js';
import type { BullWorkers } from './bull-workers.js';
import { TIER_RANK, attestedAt, type ConnectedWorker } from './connected-worker.js';
import type { LeaseRecord, LeaseStore } from './lease-store.js';
import type { ResumeClaim } from '../sdk/protocol/index.js';

export interface LeaseHandoverOptions {
  leases: LeaseStore;
  runs: RunStore;
  bull: BullWorkers;
  gatewayId: string;
  leaseTtlMs: number;
}

/** A lease record that carries what a handover needs. */
export type MovableLease = LeaseRecord & Required<Pick<LeaseRecord, 'queue' | 'job_id' | 'lock_token' | 'owner'>>;

/** A lease this instance now holds, with what it needs to extend and finish it. */
export interface AdoptedLease {
  record: MovableLease;
  job: Job<QueuedJobData>;
  /** The caller canceled the run while the lease was between instances: tell the worker now. */
  cancelRequested: boolean;
  /** When the attempt times out (ms), from the run record; null: never. */
  timeoutAt: number | null;
}

/** Why a claim was refused; `runId` when the lease record was found. */
export interface RefusedClaim {
  why: string;
  runId?: string;
}

function isMovable(record: LeaseRecord): record is MovableLease {
  return !!(record.queue && record.job_id && record.lock_token && record.owner);
}

/** How a lease record names the owner of the worker token that holds it. */
export const ownerKey = (owner: { type: string; id: string }): string => `${owner.type}:${owner.id}`;

/**
 * The receiving end of a lease handover (docs/worker-protocol.md, "Moving to another
 * instance"). A worker that left a stopping instance claims the leases it still runs; a
 * claim is honoured only when the worker proves possession (the upload token that only the
 * lease frame carried), the fence is still the run's, the run is still running, and the
 * BullMQ lock is still held under the token the first instance minted, which comes from the
 * lease record and never from the worker. Anything refused is left to lapse: the stalled
 * checker requeues it once its lock expires.
 */
export class LeaseHandover {
  constructor(private readonly opts: LeaseHandoverOptions) {}

  async adopt(claim: ResumeClaim, worker: ConnectedWorker): Promise<AdoptedLease | RefusedClaim> {
    const record = await this.opts.leases.verifyUpload(claim.lease_id, claim.upload_token);
    if (!record) return { why: 'no live lease with this upload token' };
    const refused = (why: string): RefusedClaim => ({ why, runId: record.run_id });
    if (record.fence !== claim.fence) return refused('the fence is not the lease’s');
    // Made by a gateway from before handovers: it kept no lock token to hand over.
    if (!isMovable(record)) return refused('the lease cannot be handed over');
    if (record.owner !== ownerKey(worker.info.owner)) return refused('the lease belongs to another token owner');
    const serves = worker.tiers ? worker.tiers.includes(record.tier as Tier) : TIER_RANK[worker.info.tier] >= TIER_RANK[record.tier as Tier];
    if (!serves) return refused('the worker’s tier is too weak for the run');
    // A private run continues only on a connection that attested afresh (registration does so before adopting).
    if (record.tier === 'private' && !attestedAt(worker)) return refused('the worker has no valid attestation evidence on this connection');
    // Extending the lock with the minted token proves it is still this lease's (not lapsed and
    // requeued) and restarts its TTL on this instance's clock.
    const lapsed = await this.opts.bull.extend(record.queue, [record.job_id], [record.lock_token]);
    if (lapsed.length > 0) return refused('its lock lapsed');
    const job = await this.opts.bull.job(record.queue, record.job_id);
    if (!job || job.attemptsStarted !== record.fence) return refused('the job moved on');
    // One adopter wins even if the same claim reaches two instances.
    const to = { worker_id: worker.info.worker_id, gateway_id: this.opts.gatewayId };
    if (!(await this.opts.leases.adopt(record.lease_id, record.worker_id, to, this.opts.leaseTtlMs))) return refused('another worker adopted it');
    const moved = await this.opts.runs.transition(record, { from: ['running'], fence: record.fence, set: { worker_id: worker.info.worker_id } });
    if (!moved.ok) return refused('the run is no longer leased under this fence');
    return { record: { ...record, ...to }, job, cancelRequested: !!moved.run.cancel_requested_at, timeoutAt: moved.run.timeout_at ? Date.parse(moved.run.timeout_at) : null };
  }
}
