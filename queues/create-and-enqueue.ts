import type { Logger } from 'pino';
import type { PipedCreate, RedisRunStore } from '../models/redis/redis-run-store.js';
import { isNoScript } from '../models/redis/redis-scripts.js';
import type { GateCheck, NewRun } from '../models/types.js';
import { CreateForecast } from './create-forecast.js';
import type { JobQueues } from './job-queues.js';

export interface CreateAndEnqueueOptions {
  /** The run store; the runs must be in the Redis the queues are in (not MongoDB). */
  store: RedisRunStore;
  /**
   * The producer queues. Both commands go on their connection (core.ts `queueConnection`): the
   * one BullMQ's scripts are defined on, which the request connection is kept free of (core.ts
   * says why); the create goes by EVALSHA, which needs no definition.
   */
  queues: JobQueues;
  log: Logger;
  /** @defaultValue one built on the store's fair-share step */
  forecast?: CreateForecast;
}

/**
 * What `submit` did. `ran: false`: Redis did not have the create's script (SCRIPT FLUSH): the
 * create, and the gate with it, did not run, so nothing was created and nothing counted; the
 * run id is spent (its job, if one was left, is dropped at lease: no record will ever have it).
 * Otherwise the create's result, and `queued`: its job is in its queue with the run's priority.
 */
export type CreateAndEnqueueResult = { ran: false } | ({ ran: true; queued: boolean } & PipedCreate);

/**
 * A submission's create and its BullMQ add in one Redis round trip: both sent on one connection
 * in the same event-loop turn, the create first, without waiting for its answer. The
 * connection auto-pipelines, so they go out in one write with whatever else the turn sent
 * (other submissions' included). An explicit pipeline per submission cost a write each and a
 * copy of BullMQ's ~60 scripts into each (ioredis copies a connection's defined scripts into
 * every pipeline it builds: ~47 µs here): 60–80% more gateway CPU per job in the submit
 * benchmark (docs/benchmarks.md). Redis runs a connection's commands in the order they came,
 * so the run's record exists before its job does, as when the add waited for the create's
 * answer; a dispatcher never sees the job of a run that will be made. A crash between the two
 * still leaves an unconfirmed run for the EnqueueReconciler.
 *
 * The add is sent before the create has answered, so with the priority the create is expected to
 * give (CreateForecast) and changed after when the create gave another. A create that made
 * nothing (credits short, account gone, gate refused) has its job removed; one leased in between
 * is dropped by the dispatcher, whose lease finds no record. That is safe only because the run
 * id is one no other request will use: the caller sends only runs with a fresh id this way (not
 * an Idempotency-Key's, which a later request reuses and whose run a stray job could meet).
 */
/** How far (in ranks) the guessed priority of a job may be from its run's and be kept. */
export const PRIORITY_SLACK = 1;

export class CreateAndEnqueue {
  private readonly forecast: CreateForecast;

  constructor(private readonly opts: CreateAndEnqueueOptions) {
    this.forecast = opts.forecast ?? new CreateForecast({ step: opts.store.fairShareStep });
  }

  /** A run became terminal through this instance: its account has one run fewer in flight. */
  runFinished(run: { account_id: string; kind: string }): void {
    this.forecast.finished(run.account_id, run.kind);
  }

  /** False when the create is expected to be refused: it is then sent alone, before any add. */
  worthPipelining(accountId: string, gate?: GateCheck): boolean {
    return this.forecast.likelyAdmitted(accountId, gate?.lookupId);
  }

  /** Creates the run (behind `gate`, when given) and queues its job, in one round trip. */
  async submit(run: NewRun, gate?: GateCheck): Promise<CreateAndEnqueueResult> {
    const guess = this.forecast.priority(run.account_id, run.kind, run.priorityBase);
    let inFlight: number | undefined;
    let share: number | undefined;
    try {
      const client = await this.opts.queues.producer(run);
      // From here to the awaits below, nothing yields: the two are sent in this order.
      const created = this.opts.store.sendCreate(this.opts.queues.connection, run, gate);
      let sent: ReturnType<JobQueues['addNow']>;
      try {
        sent = this.opts.queues.addNow(client, { ...run, priority: guess });
      } catch (err) {
        // Options BullMQ refuses (never ours): the run, if made, is left to the reconciler.
        created.catch(() => {});
        throw err;
      }
      const { job, added } = sent;
      const [create, add] = await Promise.allSettled([created, added]);
      if (create.status === 'rejected') {
        // Any other error is thrown as the create's was before: the create may have run (its
        // job then is its job), or not (its job then is a stray that no record will claim).
        if (!isNoScript(create.reason)) throw create.reason;
        this.opts.log.warn({ runId: run.run_id }, 'Redis did not have the create script cached; the run is made again under another id');
        await this.drop(run);
        return { ran: false };
      }
      const piped = create.value;
      if (!('result' in piped)) {
        this.forecast.gateRefused(gate!.lookupId, piped.gate);
        await this.drop(run);
        return { ran: true, queued: false, ...piped };
      }
      const { result } = piped;
      if (result.outcome === 'insufficient_credits' || result.outcome === 'no_account' || result.outcome === 'budget_exceeded' || result.outcome === 'claim_lost') {
        this.forecast.refused(run.account_id);
        await this.drop(run);
        return { ran: true, queued: false, ...piped };
      }
      // `exists` (a fresh id cannot be taken, but a create resent after a reconnect finds its
      // own run): the add was BullMQ's no-op on the job there, or the job of a run that is not
      // queued any more, which its lease drops. Nothing is removed: the job may be the run's.
      if (result.outcome === 'exists') return { ran: true, queued: false, ...piped };
      inFlight = piped.inFlight;
      share = piped.share;
      if (add.status === 'rejected') {
        this.opts.log.warn({ err: add.reason, runId: run.run_id }, 'the queue write of a created run failed; it is written again');
        return { ran: true, queued: false, ...piped };
      }
      // A guess one rank off is kept: a finish racing the create's reply moves a busy account's
      // rank by one (FAIR_SHARE_STEP 1), and correcting that cost a script on ~40% of its
      // submissions (bench cycle) for a job served at most one round early or late.
      if (Math.abs(result.run.priority - guess) > PRIORITY_SLACK) await this.reprioritize(job, result.run.priority);
      return { ran: true, queued: true, ...piped };
    } finally {
      this.forecast.answered(run.account_id, run.kind, inFlight, share);
    }
  }

  /**
   * The job given the priority its create gave. A job already leased keeps running (BullMQ
   * only rewrites its stored priority, which a requeue then uses); one already gone is left be.
   */
  private async reprioritize(job: { changePriority(opts: { priority: number }): Promise<void> }, priority: number): Promise<void> {
    try {
      await job.changePriority({ priority });
    } catch (err) {
      this.opts.log.warn({ err }, 'could not give a queued job the priority of its run; it keeps the one guessed');
    }
  }

  /** Removes the job of a run that was not made. One under lease now is dropped by its dispatcher (no record). */
  private async drop(run: NewRun): Promise<void> {
    try {
      await this.opts.queues.remove(run);
    } catch (err) {
      this.opts.log.warn({ err, runId: run.run_id }, 'could not remove the job of a run that was not created; dispatch will drop it');
    }
  }
}
