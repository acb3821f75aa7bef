import type { RunDurability } from '../models/run-durability.js';
import { UnrecoverableError, type Job } from 'bullmq';
import type { Logger } from 'pino';
import type { ArtifactMeta, ArtifactStore } from '../models/artifact-store.js';
import { isDatastoreUnavailable } from '../models/errors.js';
import type { RunStore } from '../models/stores.js';
import { isTerminal, type RunError, type RunRecord } from '../models/types.js';
import { normalizeRunError } from '../models/run-error-codes.js';
import { maxAttemptsOf, type QueuedJobData } from '../queues/job-queues.js';
import { queueTier } from '../queues/queue-names.js';
import { AttestationError } from '../sdk/attestation/index.js';
import { isLockLost } from './bull-workers.js';
import type { ConcurrencyGate } from './concurrency-gate.js';
import type { ConnectedWorker } from './connected-worker.js';
import type { DispatchObserver, LeaseLossReason, PipelineEnd } from './dispatch-observer.js';
import type { ActiveLease, LeaseTable } from './lease-table.js';
import { OutputFiles } from './output-files.js';
import type { ReceiptChecker, RunAttestation } from './receipt-check.js';
import type { RetryPolicy } from './retry-policy.js';
import type { WorkerFrame } from '../sdk/protocol/index.js';

/** What the dispatcher does with a worker's live reports once their lease checks out. */
export interface WorkerReportSink {
  progress(runId: string, progress: number, message?: string): Promise<void>;
  logLine(runId: string, line: string): Promise<void>;
  output(runId: string, delta: string, guard?: { leaseId: string; seq: number }): Promise<void>;
}

export type { ActiveLease } from './lease-table.js';

/**
 * What settlement needs from the rest of the dispatcher. Passed in rather than imported: the
 * scheduler and the worker pool build on settlement, so importing them back would be a cycle.
 */
export interface SettlementContext {
  /** A lease ended: the worker's freed slot is offered work. */
  fill(worker: ConnectedWorker): Promise<void>;
  /** A run went back to its queue: every instance may lease it. */
  announce(queue: string): Promise<void>;
  /** The worker attached under this id now, if any. */
  attached(workerId: string): ConnectedWorker | undefined;
  /** A rank before the last of a pipeline reported `complete`: its part is done, the run goes on. */
  rankDone?(lease: ActiveLease): void;
  /** A rank lease ended its run's attempt (finished, failed, lost): its pipeline ends on every instance. */
  pipelineEnded?(lease: ActiveLease, why: string, end: PipelineEnd): void;
}

/** Whether the lease is the last rank of its pipeline, or a whole lease: the one whose reports are the run's. */
const makesOutput = (lease: ActiveLease): boolean => !lease.rank || lease.rank.index === lease.rank.pipeline.count - 1;

export interface LeaseSettlementOptions {
  runs: RunStore;
  /** The leases held here: looked up by reports and cancels, freed and ended here. */
  table: LeaseTable;
  log: Logger;
  maxAttempts: number;
  /** Where the artifacts are: a succeeded run's `output.files` is read from their records. */
  artifacts: ArtifactStore;
  /** Tells this gateway's artifact URLs from others; read at each settlement (PORT=0 settles it late). */
  publicUrl: () => string;
  events?: WorkerReportSink;
  metrics?: DispatchObserver;
  receipts?: ReceiptChecker;
  /** Puts a retry back in its queue: elsewhere at once, or after a backoff. */
  retries: Pick<RetryPolicy, 'requeue'>;
  /** Frees a run's concurrency slots when its lease ends here. */
  gate?: Pick<ConcurrencyGate, 'release'>;
  /** REDIS_WAIT_REPLICAS: a worker's end is acknowledged once the settle's writes are on the replicas. */
  replicas?: Pick<RunDurability, 'settled'>;
}

type Refusal = { code: string; message: string };

/**
 * Every way a lease held here ends: reported by its worker, lost with its worker or its lock.
 * The leases themselves are the `LeaseTable`'s; settlement looks them up there and frees and
 * ends them there. The run record is moved first in every step (it is the fence), BullMQ second.
 */
export class LeaseSettlement {
  private readonly outputFiles: OutputFiles;

  constructor(
    private readonly ctx: SettlementContext,
    private readonly opts: LeaseSettlementOptions,
  ) {
    this.outputFiles = new OutputFiles({ artifacts: opts.artifacts, publicUrl: opts.publicUrl, log: opts.log });
  }

  /** Heartbeat: extends the worker's leases; one whose lock lapsed meanwhile is lost. */
  async heartbeat(worker: ConnectedWorker): Promise<void> {
    for (const lease of await this.opts.table.extend(worker)) await this.loseLease(lease.id, 'its lock lapsed', 'heartbeat');
  }

  /** Handles a lease frame; returns the error frame to send, or null (acknowledged). */
  async report(worker: ConnectedWorker, frame: Extract<WorkerFrame, { lease_id: string }>): Promise<Refusal | null> {
    const lease = this.opts.table.get(frame.lease_id);
    if (!lease || lease.worker !== worker || lease.fence !== frame.fence || lease.closing) {
      return { code: 'stale_lease', message: 'this lease is no longer yours: drop its work' };
    }
    const run = { run_id: lease.runId, account_id: lease.accountId };
    switch (frame.type) {
      case 'progress': {
        const t = await this.opts.runs.transition(run, { from: ['running'], fence: lease.fence, set: { progress: frame.progress }, returning: 'none' });
        if (!t.ok) return { code: 'stale_lease', message: 'the run is no longer leased to you' };
        await this.opts.events?.progress(run.run_id, frame.progress, frame.message);
        return null;
      }
      case 'log':
        await this.opts.events?.logLine(run.run_id, frame.line);
        return null;
      case 'output':
        if (!makesOutput(lease)) return { code: 'bad_frame', message: 'only the last rank of a pipeline streams output' };
        // Reached without an await since the call: the delta is queued in the order the frames
        // came, which lets the worker socket take the next frame before this one is logged.
        await this.opts.events?.output(run.run_id, frame.delta, frame.seq === undefined ? undefined : { leaseId: frame.lease_id, seq: frame.seq });
        return null;
      case 'complete':
      case 'fail': {
        lease.closing = true;
        if (frame.type === 'complete' && !makesOutput(lease)) {
          // A rank before the last is done with its part: its slot is free, the run goes on.
          this.ctx.rankDone?.(lease);
          await this.release(lease);
          return null;
        }
        const { worker: w } = lease;
        w.settling = (w.settling ?? 0) + 1;
        try {
          // A worker's code outside the list (an old name, its own) is recorded as the list's (models/run-error-codes.ts).
          const refused = await (frame.type === 'complete' ? this.settle(lease, 'succeeded', null, frame.output, frame.receipt, frame.usage) : this.settle(lease, 'fail', normalizeRunError(frame.error)));
          if (lease.rank) {
            const end = frame.type === 'complete' ? 'finished' : frame.error.code === 'canceled' ? 'canceled' : 'failed';
            this.ctx.pipelineEnded?.(lease, frame.type === 'complete' ? 'the last rank finished' : `rank ${lease.rank.index} failed (${frame.error.code}): ${frame.error.message}`, end);
          }
          return refused;
        } finally {
          w.settling--;
        }
      }
    }
  }

  /** Ends a lease the way its worker said; refused (stale) if the record moved on under another lease. */
  private async settle(lease: ActiveLease, reported: 'succeeded' | 'fail', error: RunError | null, output?: RunRecord['output'], receipt?: string, usage?: RunRecord['usage']): Promise<Refusal | null> {
    // On a datastore error the lease stays open: the worker sends its report again (docs/worker-protocol.md).
    let retryable = false;
    try {
      if (reported === 'succeeded' && lease.job.data.tier !== 'private' && queueTier(lease.queue) !== 'private') return await this.succeed(lease, output, usage);
      const run = await this.opts.runs.get(lease.runId);
      if (run && run.fence === lease.fence && run.status === 'succeeded' && reported === 'succeeded') {
        // This very report succeeded the run before, but its answer was lost to an outage: acknowledge it again.
        await lease.job.moveToCompleted(output ?? null, lease.token, false).catch(() => {});
        return null;
      }
      if (!run || run.fence !== lease.fence || run.status !== 'running') return { code: 'stale_lease', message: 'the run is no longer leased to you' };
      let attestation: RunAttestation | undefined;
      let checkedArtifacts: ReadonlyMap<string, ArtifactMeta> | undefined;
      if (reported === 'succeeded' && run.confidentiality === 'private') {
        const checked = await this.checkReceipt(run, lease, output, receipt);
        if ('refused' in checked) return checked.refused;
        ({ attestation, artifacts: checkedArtifacts } = checked);
      }
      // A worker's failure: `canceled` ends a run the caller canceled; otherwise retryable or final.
      const outcome = reported === 'succeeded' ? 'succeeded' : error!.code === 'canceled' && run.cancel_requested_at ? 'canceled' : error!.retryable ? 'retry' : 'failed';
      this.opts.log.debug({ runId: run.run_id, leaseId: lease.id, outcome, code: error?.code }, 'lease reported');
      if (outcome === 'retry') await this.requeueOrFail(run, lease, error!);
      else {
        // The gateway's own account of the files replaces any `files` the worker put in its output.
        if (outcome === 'succeeded' && output) output = { ...output, files: await this.outputFiles.describe(run.run_id, output.urls, checkedArtifacts) };
        const ok = await this.finish(run, lease.fence, lease.job, lease.token, outcome, error, output, attestation, usage);
        if (!ok) return { code: 'stale_lease', message: 'the run is no longer leased to you' };
      }
      return null;
    } catch (err) {
      retryable = isDatastoreUnavailable(err);
      if (retryable) lease.closing = false;
      throw err;
    } finally {
      if (!retryable) await this.release(lease);
    }
  }

  /**
   * A worker's success for a run that is not private, without reading the record first: the
   * fenced transition checks its status and fence, and returns it when it refuses. This saves
   * a read and decoding of the whole record (its input too) on every completed job.
   */
  private async succeed(lease: ActiveLease, output: RunRecord['output'] | undefined, usage?: RunRecord['usage']): Promise<Refusal | null> {
    const run = { run_id: lease.runId, account_id: lease.accountId };
    this.opts.log.debug({ runId: run.run_id, leaseId: lease.id, outcome: 'succeeded' }, 'lease reported');
    // The gateway's own account of the files replaces any `files` the worker put in its output.
    const described = output && { ...output, files: await this.outputFiles.describe(run.run_id, output.urls) };
    // The usage is charged by the very transition that makes the run succeed (docs/jobs.md, "Cost").
    const set = { output: described ?? { urls: [] }, progress: 1, finished_at: new Date().toISOString(), error: null, ...(usage && { usage }) };
    const t = await this.opts.runs.transition(run, { from: ['running'], fence: lease.fence, to: 'succeeded', set, attempt: { attempt: lease.fence, ended_at: set.finished_at, error: null } });
    if (t.ok) {
      // The success is recorded: the worker's slot takes its next job while BullMQ's is finished
      // (a job left unfinished by a crash here is dropped when next leased: the record wins).
      this.free(lease);
      await this.endJob(run.run_id, lease.job, lease.token, 'succeeded', null, described);
      await this.settled(run.run_id);
      return null;
    }
    if (t.run?.fence === lease.fence && t.run.status === 'succeeded') {
      // This very report succeeded the run before, but its answer was lost to an outage: acknowledge it again.
      await lease.job.moveToCompleted(described ?? null, lease.token, false).catch(() => {});
      return null;
    }
    return { code: 'stale_lease', message: 'the run is no longer leased to you' };
  }

  /**
   * A private run's receipt, checked before the run may succeed. A bad or missing one fails the
   * attempt as retryable (requeued; on the last attempt the run fails with `receipt_invalid`),
   * and the worker is told why.
   */
  private async checkReceipt(
    run: RunRecord,
    lease: ActiveLease,
    output: RunRecord['output'] | undefined,
    receipt: string | undefined,
  ): Promise<{ attestation: RunAttestation; artifacts: ReadonlyMap<string, ArtifactMeta> } | { refused: Refusal }> {
    try {
      if (!this.opts.receipts) throw new AttestationError('malformed', 'this gateway cannot check receipts');
      const evidence = lease.worker.attestation?.evidence() ?? [];
      const urls = output?.urls ?? [];
      // A ranked run's receipt is its last rank's, naming the worker of every rank (members are by rank).
      const ranks = lease.rank?.pipeline.members.map((m) => m.workerId);
      const checked = await this.opts.receipts.check({ run, leaseId: lease.id, workerId: lease.worker.info.worker_id, evidence, urls, receipt, ...(ranks && { ranks }) });
      return { attestation: checked.attestation, artifacts: new Map(urls.map((url, i) => [url, checked.artifacts[i]])) };
    } catch (err) {
      // The datastore failing is no verdict on the receipt: the worker sends its report again.
      if (isDatastoreUnavailable(err)) throw err;
      // Any other failure refuses the receipt (requeued, not left running): only a check's own reason reaches the worker.
      const reason = err instanceof AttestationError ? err.code : 'unchecked';
      const message = err instanceof AttestationError ? `the receipt was refused (${err.code}): ${err.message}` : 'the receipt was refused (unchecked): the gateway could not check it';
      this.opts.log.warn({ err, runId: run.run_id, leaseId: lease.id, workerId: lease.worker.info.worker_id, reason }, 'private run receipt refused');
      await this.requeueOrFail(run, lease, { code: 'receipt_invalid', message, retryable: true });
      return { refused: { code: 'receipt_invalid', message } };
    }
  }

  /**
   * A retryable end: back to the queue while attempts remain, else a final failure. A failure
   * the worker reported (not a lost worker) goes back by the retry policy: at once with the
   * worker cooling off the queue when another worker could take it, else after a backoff.
   */
  async requeueOrFail(run: RunRecord, lease: ActiveLease, error: RunError, reported = true): Promise<void> {
    if (run.cancel_requested_at) {
      await this.finish(run, lease.fence, lease.job, lease.token, 'canceled', { code: 'canceled', message: 'canceled by the caller', retryable: false });
      return;
    }
    const attemptsLeft = lease.job.attemptsStarted < maxAttemptsOf(lease.job.data, this.opts.maxAttempts);
    if (!attemptsLeft) {
      await this.finish(run, lease.fence, lease.job, lease.token, 'failed', { ...error, retryable: false });
      return;
    }
    const ended = { attempt: lease.fence, ended_at: new Date().toISOString(), error: { ...error, attempt: lease.fence } };
    const back = await this.opts.runs.transition(run, { from: ['running'], fence: lease.fence, to: 'queued', set: { worker_id: null, progress: null, timeout_at: null }, attempt: ended });
    if (!back.ok) return;
    this.opts.metrics?.requeued(lease.job.data.kind, lease.job.data.tier);
    // Before the lease's slot is freed, which fills it at once: a cool-off must be in place by then.
    await this.opts.retries.requeue(lease, error, reported);
  }

  /** Makes the run terminal (the store settles its credits once), then completes or fails its job. */
  async finish(
    run: RunRecord,
    fence: number,
    job: Job<QueuedJobData>,
    token: string,
    status: 'succeeded' | 'failed' | 'canceled',
    error: RunError | null,
    output?: RunRecord['output'],
    attestation?: RunAttestation,
    usage?: RunRecord['usage'],
  ): Promise<boolean> {
    const now = new Date().toISOString();
    // A private run's attestation and usage are written by the very transition that makes it succeed (and charges it).
    const succeeded = { output: output ?? { urls: [] }, progress: 1, finished_at: now, error: null, ...(attestation ? { attestation: { ...attestation } } : {}), ...(usage ? { usage } : {}) };
    // Every failure says the attempt it happened on; that attempt's entry ends with it.
    if (error) error = { ...error, attempt: error.attempt ?? fence };
    const t = await this.opts.runs.transition(run, {
      from: ['running', 'queued'],
      fence,
      to: status,
      set: status === 'succeeded' ? succeeded : { error, finished_at: now },
      ...(fence > 0 && { attempt: { attempt: fence, ended_at: now, error } }),
    });
    if (!t.ok) return false;
    await this.endJob(run.run_id, job, token, status, error, output);
    await this.settled(run.run_id);
    return true;
  }

  /**
   * REDIS_WAIT_REPLICAS: before the worker hears its end was taken, the settle is on the
   * replicas, so a failover after the ack cannot bring the run back to run again; short of them,
   * the run must still be final in the store, or the report is asked again (unavailable).
   */
  private async settled(runId: string): Promise<void> {
    await this.opts.replicas?.settled(runId);
  }

  /** Completes or fails the BullMQ job of a run whose record is final already. */
  private async endJob(runId: string, job: Job<QueuedJobData>, token: string, status: 'succeeded' | 'failed' | 'canceled', error: RunError | null, output?: RunRecord['output']): Promise<void> {
    try {
      if (status === 'succeeded') await job.moveToCompleted(output ?? null, token, false);
      else await job.moveToFailed(new UnrecoverableError(error?.message ?? status), token, false);
    } catch (err) {
      // The record is final; a job whose lock is gone is dropped when next leased.
      if (!isLockLost(err)) this.opts.log.warn({ err, runId }, 'could not finish the BullMQ job');
    }
  }

  /**
   * Frees the lease's slot: no longer counted against its worker, which is filled again at once
   * (once its run's concurrency slots are freed: else that fill would find them taken).
   */
  private free(lease: ActiveLease): void {
    if (!this.opts.table.free(lease)) return;
    if (!this.opts.gate || lease.rank) return void this.ctx.fill(lease.worker);
    void this.opts.gate.release(lease.job.data, lease.token).finally(() => this.ctx.fill(lease.worker));
  }

  /** Ends a rank lease whose pipeline ended: its slot freed and record deleted; its run is not touched. */
  drop(lease: ActiveLease): Promise<void> {
    return this.release(lease);
  }

  /** Ends the lease here: its slot freed (if not yet), then its record deleted, which the next lease need not wait for. */
  private async release(lease: ActiveLease): Promise<void> {
    this.free(lease);
    await this.opts.table.end(lease);
  }

  /** A lease whose worker is gone: requeue (attempt + 1), cancel if asked, or fail on the last attempt. */
  async loseLease(leaseId: string, why: string, reason: LeaseLossReason, sent = true): Promise<void> {
    const lease = this.opts.table.get(leaseId);
    if (!lease || lease.closing) return;
    lease.closing = true;
    try {
      const run = await this.opts.runs.get(lease.runId);
      if (!run || run.fence !== lease.fence || run.status !== 'running') return;
      this.opts.log.info({ runId: run.run_id, leaseId, why }, 'lease lost');
      this.opts.metrics?.leaseLost(reason);
      await this.requeueOrFail(run, lease, { code: 'worker_lost', message: `the worker was lost: ${why}`, retryable: true }, false);
    } catch (err) {
      this.opts.log.warn({ err, runId: lease.runId, leaseId }, 'could not hand back a lost lease; its lock will lapse and the stalled checker requeues it');
    } finally {
      // A worker still attached (lock lapsed under it) stops computing a run that now runs elsewhere.
      if (sent && this.ctx.attached(lease.worker.info.worker_id) === lease.worker) {
        lease.worker.send({ type: 'error', code: 'stale_lease', lease_id: lease.id, run_id: lease.runId, message: `this lease was lost (${why}): drop its work` });
      }
      if (lease.rank) this.ctx.pipelineEnded?.(lease, `rank ${lease.rank.index} was lost: ${why}`, 'lost');
      await this.release(lease);
    }
  }

  /** A cancel published by whichever instance took it: only the one holding the lease has a worker to tell. */
  cancelLocal(runId: string): void {
    const lease = this.opts.table.ofRun(runId);
    if (lease && !lease.closing) lease.worker.send({ type: 'cancel', lease_id: lease.id, run_id: runId });
  }
}
