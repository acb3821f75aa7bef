import { randomBytes } from 'node:crypto';
import type { Job } from 'bullmq';
import type { Logger } from 'pino';
import { hashSecret } from '../models/credentials.js';
import type { RunStore } from '../models/stores.js';
import type { QueuedJobData } from '../queues/job-queues.js';
import { modelQueueKey, queueName } from '../queues/queue-names.js';
import type { LeaseFrame, ResumeClaim } from '../sdk/protocol/index.js';
import type { BullWorkers } from './bull-workers.js';
import type { ConnectedWorker } from './connected-worker.js';
import type { FleetCounters } from './fleet-counters.js';
import { LeaseHandover, ownerKey } from './lease-handover.js';
import type { LeaseStore } from './lease-store.js';
import type { Pipeline, RankLeaseState } from './pipelines/pipeline.js';

/** A lease held on this instance: what its reports are checked against and what ends its job. */
export interface ActiveLease {
  id: string;
  fence: number;
  runId: string;
  accountId: string;
  queue: string;
  token: string;
  job: Job<QueuedJobData>;
  worker: ConnectedWorker;
  /** Set once a final report is being handled, so a second one is refused. */
  closing: boolean;
  /** Adopted from another instance after the caller canceled: the worker is told once attached. */
  cancelOnAttach?: boolean;
  /** A rank lease: its place in its pipeline (docs/ranks.md). */
  rank?: RankLeaseState;
  /** The timer of its attempt's `timeout_at` (RunDeadlines), cleared when it ends here. */
  deadline?: NodeJS.Timeout;
  /** When its attempt times out (ms), as the record said when it was adopted here. */
  timeoutAt?: number;
}

/** A rank lease to hold here: the pipeline as formed, which rank, its job, and its upload token's hash. */
export interface NewRankLease {
  worker: ConnectedWorker;
  pipeline: Pipeline;
  index: number;
  job: Job<QueuedJobData>;
  uploadHash: string;
  /** Sent to the worker when the pipeline starts (`started`), not before. */
  frame: LeaseFrame;
}

/** What a new lease is made of: the worker, the fetched job under its lock, and the run it moves. */
export interface NewLease {
  worker: ConnectedWorker;
  queue: string;
  job: Job<QueuedJobData>;
  token: string;
  fence: number;
  run: { run_id: string; account_id: string; kind: string; confidentiality: string };
}

export interface LeaseTableOptions {
  /** The lease records every instance reads (uploads, handovers). */
  records: LeaseStore;
  runs: RunStore;
  bull: BullWorkers;
  /** Each lease made or ended changes its worker's busy slots. */
  fleet: Pick<FleetCounters, 'changed'>;
  gatewayId: string;
  leaseTtlMs: number;
  log: Logger;
}

/**
 * The leases this instance holds, in memory and as their records in Redis: the one place that
 * makes, extends, adopts, hands over and ends them (as BullMQ's `LockManager` alone owns its
 * tracked jobs). The scheduler makes leases here, the settlement ends them here; the table
 * calls neither back. A lease's slot is freed (`free`) as soon as its run is settled, before
 * its record is deleted (`end`), so a worker's next job does not wait for the delete.
 */
export class LeaseTable {
  private readonly active = new Map<string, ActiveLease>();
  /** Cancels arrive by run id. */
  private readonly byRun = new Map<string, ActiveLease>();
  private readonly handover: LeaseHandover;

  constructor(private readonly opts: LeaseTableOptions) {
    this.handover = new LeaseHandover({ leases: opts.records, runs: opts.runs, bull: opts.bull, gatewayId: opts.gatewayId, leaseTtlMs: opts.leaseTtlMs });
  }

  get(leaseId: string): ActiveLease | undefined {
    return this.active.get(leaseId);
  }

  /** The lease of a run held here, if any. */
  ofRun(runId: string): ActiveLease | undefined {
    return this.byRun.get(runId);
  }

  /** How many of the worker's leases are of this model of this kind (any tier). */
  leasesOf(worker: ConnectedWorker, kind: string, model: string): number {
    const key = modelQueueKey(queueName(kind, 'open', model));
    let n = 0;
    for (const id of worker.leases) if (modelQueueKey(this.active.get(id)?.queue ?? '') === key) n++;
    return n;
  }

  /**
   * Makes a lease: its record (what uploads and a handover read) written with the lease TTL,
   * then held here and counted busy. Returns it with the upload token, which only its lease
   * frame carries (the record keeps its hash).
   */
  async create(spec: NewLease): Promise<{ lease: ActiveLease; uploadToken: string }> {
    const { worker, queue, job, token, fence, run } = spec;
    const lease: ActiveLease = { id: `lse_${randomBytes(16).toString('hex')}`, fence, runId: run.run_id, accountId: run.account_id, queue, token, job, worker, closing: false };
    const uploadToken = randomBytes(32).toString('base64url');
    await this.opts.records.put(
      {
        lease_id: lease.id,
        run_id: run.run_id,
        account_id: run.account_id,
        worker_id: worker.info.worker_id,
        kind: run.kind,
        tier: run.confidentiality,
        fence,
        upload_hash: hashSecret(uploadToken),
        gateway_id: this.opts.gatewayId,
        queue,
        job_id: job.id!,
        lock_token: token,
        owner: ownerKey(worker.info.owner),
      },
      this.opts.leaseTtlMs,
    );
    this.track(lease);
    this.counted(worker, worker);
    return { lease, uploadToken };
  }

  /**
   * Holds one rank lease of a pipeline (formed here or on another instance): its record written
   * with the lease TTL, then counted busy. It carries no owner, so it cannot be handed over to
   * another instance: a rank worker that moves loses it, and its pipeline runs again.
   */
  async attachRank(spec: NewRankLease): Promise<ActiveLease> {
    const { worker, pipeline, index, job, uploadHash, frame } = spec;
    const lease: ActiveLease = {
      id: pipeline.members[index].leaseId,
      fence: pipeline.fence,
      runId: pipeline.runId,
      accountId: pipeline.accountId,
      queue: pipeline.queue,
      token: pipeline.token,
      job,
      worker,
      closing: false,
      rank: { pipeline, index, sentSeq: 0, receivedSeq: 0, streamEnded: false, started: false, leaseFrame: frame },
    };
    await this.opts.records.put(
      {
        lease_id: lease.id,
        run_id: pipeline.runId,
        account_id: pipeline.accountId,
        worker_id: worker.info.worker_id,
        kind: pipeline.kind,
        tier: pipeline.tier,
        fence: pipeline.fence,
        upload_hash: uploadHash,
        gateway_id: this.opts.gatewayId,
        queue: pipeline.queue,
        job_id: pipeline.jobId,
        lock_token: pipeline.token,
      },
      this.opts.leaseTtlMs,
    );
    this.track(lease);
    this.counted(worker, worker);
    return lease;
  }

  /**
   * Extends the worker's leases by one TTL: their BullMQ locks (per queue, one call each) and
   * their records. Returns the leases whose lock had lapsed meanwhile: they are lost.
   */
  async extend(worker: ConnectedWorker): Promise<ActiveLease[]> {
    const byQueue = new Map<string, ActiveLease[]>();
    for (const id of worker.leases) {
      const lease = this.active.get(id);
      if (lease) byQueue.set(lease.queue, [...(byQueue.get(lease.queue) ?? []), lease]);
    }
    const lapsed: ActiveLease[] = [];
    await Promise.all(
      [...byQueue].map(async ([queue, leases]) => {
        const lost = await this.opts.bull.extend(queue, leases.map((l) => l.job.id!), leases.map((l) => l.token));
        await this.opts.records.touch(leases.map((l) => l.id), this.opts.leaseTtlMs);
        for (const lease of leases) if (lost.includes(lease.job.id!)) lapsed.push(lease);
      }),
    );
    return lapsed;
  }

  /**
   * Takes over the leases a worker brought from a stopping instance (its register's `resume`),
   * before it is attached, so they count against its slots. Each claim is checked by
   * `LeaseHandover`; the lost ones are left to lapse and be requeued by the stalled checker.
   */
  async adopt(worker: ConnectedWorker, claims: ResumeClaim[]): Promise<{ resumed: string[]; lost: string[] }> {
    const resumed: string[] = [];
    const lost: string[] = [];
    for (const claim of claims.slice(0, worker.info.slots)) {
      // Held here already (by this worker, claimed twice, or by another one): not taken again.
      const held = this.active.get(claim.lease_id);
      const outcome = held
        ? { why: 'the lease is already held on this instance', runId: held.runId }
        : await this.handover.adopt(claim, worker).catch((err: Error) => ({ why: `could not check it: ${err.message}`, runId: undefined }));
      if (!('record' in outcome)) {
        lost.push(claim.lease_id);
        this.opts.log.info({ runId: outcome.runId ?? null, leaseId: claim.lease_id, workerId: worker.info.worker_id, why: outcome.why }, 'lease not resumed');
        continue;
      }
      const { record, job } = outcome;
      const lease: ActiveLease = {
        id: record.lease_id,
        fence: record.fence,
        runId: record.run_id,
        accountId: record.account_id,
        queue: record.queue,
        token: record.lock_token,
        job,
        worker,
        closing: false,
        cancelOnAttach: outcome.cancelRequested,
        ...(outcome.timeoutAt !== null && { timeoutAt: outcome.timeoutAt }),
      };
      this.track(lease);
      resumed.push(lease.id);
      this.opts.log.info({ runId: lease.runId, leaseId: lease.id, workerId: worker.info.worker_id }, 'lease adopted');
    }
    for (const claim of claims.slice(worker.info.slots)) lost.push(claim.lease_id);
    // Not attached yet: its busy slots go into the fleet counts with its share when it attaches
    // (`FleetCounters.joined`); a full recount here, at every registration, grew with the fleet.
    worker.info.busy = worker.leases.size;
    return { resumed, lost };
  }

  /**
   * A lease whose worker is taking it to another instance: forgotten here, while its record and
   * BullMQ lock stay in Redis for the adopter. One being settled here finishes here.
   */
  handOver(leaseId: string): ActiveLease | undefined {
    const lease = this.active.get(leaseId);
    if (!lease || lease.closing || lease.rank) return undefined;
    this.untrack(lease);
    this.opts.log.info({ runId: lease.runId, leaseId, workerId: lease.worker.info.worker_id }, 'lease handed over');
    return lease;
  }

  /** Frees the lease's slot here (no longer counted against its worker); false if it was freed already. */
  free(lease: ActiveLease): boolean {
    if (!lease.worker.leases.has(lease.id)) return false;
    this.untrack(lease);
    return true;
  }

  /** Deletes the lease's record, once it ended (its slot freed before). */
  async end(lease: ActiveLease): Promise<void> {
    this.free(lease);
    await this.opts.records.delete(lease.id).catch(() => {});
  }

  private track(lease: ActiveLease): void {
    this.active.set(lease.id, lease);
    // A run's rank leases are found through their pipeline, not by run.
    if (!lease.rank) this.byRun.set(lease.runId, lease);
    lease.worker.leases.add(lease.id);
  }

  private untrack(lease: ActiveLease): void {
    clearTimeout(lease.deadline);
    this.active.delete(lease.id);
    // The run may have been requeued and leased here again before this lease was released.
    if (this.byRun.get(lease.runId) === lease) this.byRun.delete(lease.runId);
    lease.worker.leases.delete(lease.id);
    this.counted(lease.worker, lease.worker);
  }

  /** The worker's busy slots, written to the fleet counts (`only`: that worker's share alone). */
  private counted(worker: ConnectedWorker, only?: ConnectedWorker): void {
    worker.info.busy = worker.leases.size;
    this.opts.fleet.changed(only);
  }
}
