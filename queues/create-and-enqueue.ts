import type { ChainableCommander, Redis } from 'ioredis';
import type { Logger } from 'pino';
import type { PipedCreate, RedisRunStore } from '../models/redis/redis-run-store.js';
import { isNoScript } from '../models/redis/redis-scripts.js';
import type { GateCheck, NewRun } from '../models/types.js';
import { CreateForecast } from './create-forecast.js';
import type { JobQueues } from './job-queues.js';

export interface CreateAndEnqueueOptions {
  /** The run store; the runs must be in the Redis the queues are in (not MongoDB). */
  store: RedisRunStore;
  queues: JobQueues;
  /**
   * The queues' connection (core.ts `queueConnection`), the one BullMQ's scripts are defined
   * on: a pipeline carries the scripts of its connection, and the request connection is kept
   * free of BullMQ's (core.ts says why). The create goes out on it by EVALSHA, which needs no
   * definition.
   */
  connection: Redis;
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
 * A submission's create and its BullMQ add in one Redis round trip: one pipeline on one
 * connection, the create first and the add after it. Redis runs a connection's commands in
 * order, so the run's record exists before its job does, as when the two were sent one after
 * the other; a dispatcher never sees the job of a run that will be made. A crash between the
 * two still leaves an unconfirmed run for the EnqueueReconciler.
 *
 * The add is sent before the create has answered, so with the priority the create is expected to
 * give (CreateForecast) and changed after when the create gave another. A create that made
 * nothing (credits short, account gone, gate refused) has its job removed; one leased in between
 * is dropped by the dispatcher, whose lease finds no record. That is safe only because the run
 * id is one no other request will use: the caller sends only runs with a fresh id this way (not
 * an Idempotency-Key's, which a later request reuses and whose run a stray job could meet).
 */
export class CreateAndEnqueue {
  private readonly forecast: CreateForecast;

  constructor(private readonly opts: CreateAndEnqueueOptions) {
    this.forecast = opts.forecast ?? new CreateForecast({ step: opts.store.fairShareStep });
  }

  /** A run became terminal through this instance: its account has one run fewer in flight. */
  runFinished(run: { account_id: string }): void {
    this.forecast.finished(run.account_id);
  }

  /** False when the create is expected to be refused: it is then sent alone, before any add. */
  worthPipelining(accountId: string, gate?: GateCheck): boolean {
    return this.forecast.likelyAdmitted(accountId, gate?.lookupId);
  }

  /** Creates the run (behind `gate`, when given) and queues its job, in one round trip. */
  async submit(run: NewRun, gate?: GateCheck): Promise<CreateAndEnqueueResult> {
    const guess = this.forecast.priority(run.account_id, run.priorityBase);
    let inFlight: number | undefined;
    try {
      const pipeline = await this.opts.queues.pipeline(run);
      // BullMQ's pipeline is ioredis's own with `runCommand` added (bullmq's ioredis-client.js).
      const readCreate = this.opts.store.pipeCreate(pipeline as unknown as ChainableCommander, this.opts.connection, run, gate);
      const job = this.opts.queues.pipeAdd(pipeline, { ...run, priority: guess });
      const results = await pipeline.exec();
      if (!results) throw new Error('the create-and-enqueue pipeline was discarded');
      let piped: PipedCreate;
      try {
        piped = readCreate(results[0]);
      } catch (err) {
        // Any other error is thrown as the create's was before: the create may have run (its
        // job then is its job), or not (its job then is a stray that no record will claim).
        if (!isNoScript(err)) throw err;
        this.opts.log.warn({ runId: run.run_id }, 'Redis did not have the create script cached; the run is made again under another id');
        await this.drop(run);
        return { ran: false };
      }
      if (!('result' in piped)) {
        this.forecast.gateRefused(gate!.lookupId, piped.gate);
        await this.drop(run);
        return { ran: true, queued: false, ...piped };
      }
      const { result } = piped;
      if (result.outcome === 'insufficient_credits' || result.outcome === 'no_account') {
        this.forecast.refused(run.account_id);
        await this.drop(run);
        return { ran: true, queued: false, ...piped };
      }
      // `exists` (a fresh id cannot be taken, but a create resent after a reconnect finds its
      // own run): the add was BullMQ's no-op on the job there, or the job of a run that is not
      // queued any more, which its lease drops. Nothing is removed: the job may be the run's.
      if (result.outcome === 'exists') return { ran: true, queued: false, ...piped };
      inFlight = piped.inFlight;
      const [addError] = results[results.length - 1];
      if (addError) {
        this.opts.log.warn({ err: addError, runId: run.run_id }, 'the queue write of a created run failed; it is written again');
        return { ran: true, queued: false, ...piped };
      }
      if (result.run.priority !== guess) await this.reprioritize(job, result.run.priority);
      return { ran: true, queued: true, ...piped };
    } finally {
      this.forecast.answered(run.account_id, inFlight);
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
