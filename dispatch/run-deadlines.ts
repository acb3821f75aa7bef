import { UnrecoverableError, type Job } from 'bullmq';
import type { RedisClient } from '../models/redis-connection.js';
import type { Logger } from 'pino';
import { RedisKeys } from '../models/redis/keys.js';
import type { RunStore } from '../models/stores.js';
import type { RunError } from '../models/types.js';
import { expiringMember, parseExpiringMember, type QueuedJobData } from '../queues/job-queues.js';
import { isLockLost, type BullWorkers } from './bull-workers.js';
import type { PipelineEnd } from './dispatch-observer.js';
import type { LeaseSettlement } from './lease-settlement.js';
import type { ActiveLease, LeaseTable } from './lease-table.js';

/** What the deadlines need from the dispatcher's other pieces, passed in (settlement is built on the table). */
export interface RunDeadlinesContext {
  table: Pick<LeaseTable, 'get'>;
  settlement: Pick<LeaseSettlement, 'finish' | 'drop' | 'requeueOrFail'>;
  /** A rank lease timed out: its pipeline ends on every instance. */
  pipelineEnded?(lease: ActiveLease, why: string, end: PipelineEnd): void;
}

export interface RunDeadlinesOptions {
  /** Command connection: the sorted set of expiring runs. */
  redis: RedisClient;
  prefix: string;
  runs: RunStore;
  bull: Pick<BullWorkers, 'job'>;
  /** How often each instance looks for queued runs past their expiry. @defaultValue 1000 */
  sweepMs?: number;
  log: Logger;
}

/** Runs expired per sweep, at most: the rest wait for the next one. */
const SWEEP_BATCH = 200;

const expired = (): RunError => ({ code: 'expired', message: 'the job did not start within its ttl_s', retryable: false, attempt: 0 });

/**
 * A run's deadlines (docs/jobs.md, "Deadlines"). `ttl_s`: a run not started by its `expires_at`
 * fails `expired` and is never leased: the lease that fetches it past its time fails it instead,
 * and every instance sweeps the runs no worker fetched (a sorted set the queues write beside each
 * add, each entry claimed by one instance). `timeout_s`: each lease carries a timer to its
 * attempt's `timeout_at`, which tells the worker to cancel and fails the run `timed_out` (or,
 * with the job's `retry_on_timeout`, requeues it while attempts remain).
 * The run record's transitions decide every race (a run that started in the meantime, a lease
 * that ended): the expiry needs the run still queued and never leased (fence 0), the timeout the
 * lease's own fence.
 */
export class RunDeadlines {
  private readonly expiringKey: string;
  private timer: NodeJS.Timeout | null = null;
  private sweeping = false;

  constructor(
    private readonly ctx: RunDeadlinesContext,
    private readonly opts: RunDeadlinesOptions,
  ) {
    this.expiringKey = new RedisKeys(opts.prefix).runsExpiring();
  }

  start(): void {
    this.timer = setInterval(() => void this.sweep(), this.opts.sweepMs ?? 1_000);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
  }

  /** A job fetched past its expiry: its run fails `expired` if it never started (true), else it is leased as usual (false). */
  async expireFetched(job: Job<QueuedJobData>, token: string): Promise<boolean> {
    if (job.data.expires === undefined || job.data.expires > Date.now()) return false;
    if (!(await this.expire(job.data.run_id, job.data.account_id))) return false;
    try {
      await job.moveToFailed(new UnrecoverableError('expired: the job did not start within its ttl_s'), token, false);
    } catch (err) {
      if (!isLockLost(err)) throw err;
    }
    return true;
  }

  /**
   * A run with a `ttl_s` started for the first time: it leaves the sweep's set, which so holds
   * only runs still waiting (not a day of every run). Sent without waiting for the answer; an
   * entry left behind is dropped by the sweep when it falls due (the run is no longer expirable).
   */
  started(queue: string, job: Job<QueuedJobData>): void {
    if (job.data.expires === undefined) return;
    this.opts.redis.zrem(this.expiringKey, expiringMember(queue, job.data.run_id, job.data.account_id)).catch(() => {});
  }

  /** Arms the lease's timeout for `at` (ms): past it, the attempt ends `timed_out`. */
  arm(lease: ActiveLease, at: number): void {
    clearTimeout(lease.deadline);
    lease.deadline = setTimeout(() => void this.timedOut(lease).catch((err: unknown) => this.opts.log.warn({ err, runId: lease.runId }, 'could not time out a lease; its lock lapses instead')), Math.max(0, at - Date.now()));
    lease.deadline.unref();
  }

  private async timedOut(lease: ActiveLease): Promise<void> {
    if (this.ctx.table.get(lease.id) !== lease || lease.closing) return;
    lease.closing = true;
    const why = 'the attempt ran past its timeout_s';
    lease.worker.send({ type: 'cancel', lease_id: lease.id, run_id: lease.runId, reason: 'timed_out', message: why });
    try {
      const run = await this.opts.runs.get(lease.runId);
      if (run && run.status === 'running' && run.fence === lease.fence) {
        this.opts.log.info({ runId: run.run_id, leaseId: lease.id }, 'attempt timed out');
        const error = { code: 'timed_out', message: `${why} (${run.timeout_s} s)` };
        // Retried only when the job asked (`retry_on_timeout`): a timeout is costly to repeat.
        if (lease.job.data.retryTimeout) await this.ctx.settlement.requeueOrFail(run, lease, { ...error, retryable: true });
        else await this.ctx.settlement.finish(run, lease.fence, lease.job, lease.token, 'failed', { ...error, retryable: false });
      }
    } finally {
      if (lease.rank) this.ctx.pipelineEnded?.(lease, why, 'failed');
      await this.ctx.settlement.drop(lease);
    }
  }

  /** The run fails `expired` if it is still queued and was never leased; its credits come back with the failure. */
  private async expire(runId: string, accountId: string): Promise<boolean> {
    const t = await this.opts.runs.transition({ run_id: runId, account_id: accountId }, { from: ['queued'], fence: 0, to: 'failed', set: { error: expired(), finished_at: new Date().toISOString() } });
    if (t.ok) this.opts.log.info({ runId }, 'run expired before it started');
    return t.ok;
  }

  /** Expires the queued runs past their time that no worker fetched; each entry is claimed by one instance. */
  private async sweep(): Promise<void> {
    if (this.sweeping) return;
    this.sweeping = true;
    try {
      const due = await this.opts.redis.zrangebyscore(this.expiringKey, '-inf', Date.now(), 'LIMIT', 0, SWEEP_BATCH);
      for (const member of due) {
        if ((await this.opts.redis.zrem(this.expiringKey, member)) !== 1) continue;
        const at = parseExpiringMember(member);
        if (!at || !(await this.expire(at.runId, at.accountId))) continue;
        // Its job goes too (a job being leased right now is locked: that lease finds the run failed).
        const job = await this.opts.bull.job(at.queue, at.runId);
        await job?.remove().catch(() => {});
      }
    } catch (err) {
      this.opts.log.warn({ err }, 'the expiry sweep failed; the next one tries again');
    } finally {
      this.sweeping = false;
    }
  }
}
