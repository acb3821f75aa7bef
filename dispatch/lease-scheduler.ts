import { pubsub } from '../models/redis-pubsub.js';
import { leaseUploadUrl } from '../sdk/protocol/index.js';
import { leaseInputFiles } from './lease-input-files.js';
import { randomUUID } from 'node:crypto';
import { UnrecoverableError, type Job } from 'bullmq';
import type { RedisClient } from '../models/redis-connection.js';
import type { Logger } from 'pino';
import type { PriorRunFields, RunStore } from '../models/stores.js';
import { inputFileHashes, isTerminal, type RunRecord } from '../models/types.js';
import { maxAttemptsOf, type QueuedJobData } from '../queues/job-queues.js';
import { workerAliases } from './worker-alias.js';
import { whileUnavailable } from './while-unavailable.js';
import { parseQueueName, queueTier } from '../queues/queue-names.js';
import { inputDigest } from '../sdk/attestation/index.js';
import { EMPTY, isLockLost, moreUrgent, type BullWorkers } from './bull-workers.js';
import { attestedAt, coolingOff, offersLeases, type ConnectedWorker } from './connected-worker.js';
import type { ConcurrencyGate } from './concurrency-gate.js';
import type { DispatchObserver } from './dispatch-observer.js';
import type { LeaseSettlement } from './lease-settlement.js';
import type { LeaseTable } from './lease-table.js';
import { ReadyWorkers, shareOut } from './ready-workers.js';
import type { RunDeadlines } from './run-deadlines.js';

/** How far a lease got before it went out: what a failed hand-over must undo. */
export interface LeaseProgress {
  /** The run this lease moved to `running` (fenced with `fence`), and its fields as they were before. */
  started?: { run: RunRecord; prior: PriorRunFields; fence: number };
  sent: boolean;
}

/** A private job is fetched only for a worker whose evidence stays valid this much longer (checked again, strictly, before sending). */
const PRIVATE_LEASE_MARGIN_MS = 1_000;
/** `leaseFrom`: a split queue's job was parked at a concurrency limit. */
const PARKED = Symbol('parked');

/** A tier with more queues than this is probed for work in one round trip before fetching. */
const PROBE_ABOVE = 2;

/**
 * What the scheduler needs from the rest of the dispatcher. The worker pool is passed in rather
 * than imported: it calls `fill`, so importing it back would be a cycle.
 */
export interface SchedulerContext {
  /** The workers attached now. */
  workers(): Iterable<ConnectedWorker>;
  /** The worker attached under this id now, if any. */
  attached(workerId: string): ConnectedWorker | undefined;
  /** The instance is stopping: a Redis outage is not waited out. */
  stopping(): boolean;
  /** Makes each lease, and holds it. */
  table: Pick<LeaseTable, 'create' | 'leasesOf'>;
  /** Ends a lease that could not go out, or a job past its last attempt. */
  settlement: Pick<LeaseSettlement, 'loseLease' | 'finish'>;
  /** Jobs were announced on `queue` (a ranked model's queue is leased as pipelines, not here). */
  woke?(queue: string): void;
  /** Expires a job fetched past its `ttl_s`, arms each lease's `timeout_s`. */
  deadlines?: Pick<RunDeadlines, 'expireFetched' | 'arm' | 'started'>;
  /** Admits a fetched job under its account's, key's and kind's concurrency limits, or parks it. */
  gate?: Pick<ConcurrencyGate, 'admit' | 'release'>;
}

export interface LeaseSchedulerOptions {
  /** Command connection: announcements are published on it. */
  redis: RedisClient;
  /** The channel every instance's scheduler hears announcements on. */
  channel: string;
  runs: RunStore;
  bull: BullWorkers;
  log: Logger;
  maxAttempts: number;
  /** The opaque id of a worker in attempt histories. @defaultValue a key of this process's (worker-alias.ts) */
  alias?: (workerId: string) => string;
  gatewayId: string;
  leaseTtlMs: number;
  /** Read at each lease: with PORT=0 the public URL is only known once the server listens. */
  publicUrl: () => string;
  metrics?: DispatchObserver;
}

/**
 * Fills the free slots of this instance's workers from the BullMQ queues they serve. Fetching
 * is event driven: a worker's free slot is filled when it registers or finishes a lease, when
 * any instance announces a job, and by a slow safety sweep; nothing polls Redis in a loop.
 */
export class LeaseScheduler {
  private readonly ready = new ReadyWorkers(); // whom an announcement of each queue wakes
  private readonly alias: (workerId: string) => string;
  private readonly pendingAnnouncements = new Map<string, { count: number; sent: Promise<void> }>();

  constructor(
    private readonly ctx: SchedulerContext,
    private readonly opts: LeaseSchedulerOptions,
  ) {
    this.alias = opts.alias ?? workerAliases();
  }

  /**
   * Announces queued jobs to every instance's dispatcher. Announcements made in the same tick
   * are coalesced per queue into one message carrying their count: under a burst of
   * submissions this is one PUBLISH per queue per tick, not one per job.
   */
  announce(queue: string): Promise<void> {
    let pending = this.pendingAnnouncements.get(queue);
    if (!pending) {
      const entry = { count: 0, sent: undefined as unknown as Promise<void> };
      entry.sent = new Promise<void>((resolve, reject) =>
        setImmediate(() => {
          this.pendingAnnouncements.delete(queue);
          // Local workers are woken now, not when our own message comes back (a pub/sub hop fewer
          // before a lease); the message names its sender, which skips it (older ones read two words).
          this.wake(queue, entry.count);
          pubsub.publish(this.opts.redis, this.opts.channel, `${queue} ${entry.count} ${this.opts.gatewayId}`).then(() => resolve(), reject);
        }),
      );
      this.pendingAnnouncements.set(queue, entry);
      pending = entry;
    }
    pending.count++;
    return pending.sent;
  }

  /**
   * `count` announced jobs wake up to `count` local workers that can take them, from the queue's
   * ready set (taking turns; a wake costs what it wakes, not the fleet): waking every worker would
   * cost a fetch each, most finding the queue empty. Each is told its share of the jobs, so once
   * it has leased them it does not fetch again to find the queue empty (a BullMQ script saved).
   */
  wake(queue: string, count: number): void {
    this.ctx.woke?.(queue);
    const now = Date.now();
    const candidates = this.ready.take(queue, count, (w) =>
      this.ctx.attached(w.info.worker_id) === w && offersLeases(w) && w.leases.size < w.info.slots && !coolingOff(w, queue, now) && (queueTier(queue) !== 'private' || attestedAt(w, now)),
    );
    const shares = shareOut(candidates, count);
    candidates.forEach((w, k) => void this.fill(w, { queue, count: shares[k] }));
  }

  /** The worker left this instance: no announcement wakes it any more. */
  forget(worker: ConnectedWorker): void {
    this.ready.remove(worker);
  }

  /** Announces `queue` once a job put back delayed until `at` is due (another instance's sweep finds it if this one dies first). */
  announceAt(queue: string, at: number): void {
    setTimeout(() => void this.announce(queue).catch((err: unknown) => this.opts.log.warn({ err, queue }, 'could not announce a delayed retry; the safety sweep finds it')), Math.max(0, at - Date.now())).unref();
  }

  /** The worker leaves `queue` to the other workers for `ms`, then is offered work again. */
  coolOff(worker: ConnectedWorker, queue: string, ms: number): void {
    (worker.cooldowns ??= new Map()).set(queue, Date.now() + ms);
    setTimeout(() => void this.fill(worker), ms + 1).unref();
  }

  /**
   * The safety sweep, and the catch-up after a subscriber reconnect: each queue a worker here
   * could take a job from is looked at once (one round trip), and those holding work are woken
   * as an announcement of that many jobs would: three reads per queue whatever the number of
   * workers (a look per worker was 0.3 Redis commands/s per idle worker). The ready sets are
   * pruned, and every worker with a free slot is put back in them, however it got out (a safety
   * net, a CPU pass with no Redis command).
   */
  async sweep(): Promise<void> {
    const queues = this.ready.resync(this.ctx.workers(), (w) => this.ctx.attached(w.info.worker_id) === w, (w) => offersLeases(w) && w.leases.size < w.info.slots);
    if (queues.length === 0) return;
    const waiting = await this.opts.bull.waiting(queues);
    queues.forEach((queue, i) => waiting[i] > 0 && this.wake(queue, waiting[i]));
  }

  /**
   * Leases jobs to `worker` until its slots are full or no queue it serves has work; woken by an
   * announcement, until it has leased its share of the announced jobs (`announced`).
   */
  async fill(worker: ConnectedWorker, announced?: { queue: string; count: number }): Promise<void> {
    if (worker.filling) {
      worker.refill = true;
      return;
    }
    worker.filling = true;
    // Ready while it fills: a job announced after its look found the queue empty asks a refill.
    if (offersLeases(worker) && worker.leases.size < worker.info.slots && this.ctx.attached(worker.info.worker_id) === worker) this.ready.add(worker);
    try {
      let share = announced?.count ?? Infinity;
      do {
        worker.refill = false;
        while (offersLeases(worker) && worker.leases.size < worker.info.slots && this.ctx.attached(worker.info.worker_id)) {
          const queue = await this.leaseOne(worker, share === Infinity ? undefined : announced?.queue);
          if (!queue) break;
          // Took its share of what was announced: another fetch would most likely find the queue
          // empty. A job taken from another queue leaves the announced ones waiting: go on.
          if (queue === announced?.queue && --share <= 0 && !worker.refill) break;
        }
        // Asked again while filling (a release, another announcement): fill until no queue has work.
        share = Infinity;
      } while (worker.refill && offersLeases(worker));
    } catch (err) {
      this.opts.log.warn({ err, workerId: worker.info.worker_id }, 'filling a worker failed; the safety sweep retries');
    } finally {
      worker.filling = false;
      // Free slots left (no queue had work): the next announcement of one of its queues wakes it.
      if (offersLeases(worker) && worker.leases.size < worker.info.slots && this.ctx.attached(worker.info.worker_id) === worker) this.ready.add(worker);
    }
  }

  /**
   * Tries the worker's queues, its own tier first (a weaker tier's job is taken only when its
   * own tier has none), and within a tier starting at the cursor so kinds, models and partitions
   * take turns (docs/models.md, "Fairness"); a model at its `max_concurrency` is passed over.
   * Woken for jobs `announced` in a queue of its own tier, it fetches there first, with no look
   * (that partition was just given a job; the others may be empty). Otherwise it looks first: an
   * empty fetch is a BullMQ script, a look three cheap reads. The queue it leased from, or null.
   */
  private async leaseOne(worker: ConnectedWorker, announced?: string): Promise<string | null> {
    for (;;) {
      const leased = await this.walk(worker, announced);
      // A split queue's job parked at a limit: the next is the most urgent of all its partitions, looked at again.
      if (leased !== PARKED) return leased;
      announced = undefined;
    }
  }

  private async walk(worker: ConnectedWorker, announced?: string): Promise<string | typeof PARKED | null> {
    // Read together once: a reroute while this walk awaits replaces both, and their indexes must match.
    const { queues: lists, partitionsOf } = worker;
    for (const [t, queues] of lists.entries()) {
      // Private work only while the worker's evidence is valid: checked now, at every lease.
      if (worker.tiers?.[t] === 'private' && !attestedAt(worker, Date.now() + PRIVATE_LEASE_MARGIN_MS)) continue;
      const n = queues.length;
      const groups = partitionsOf?.[t];
      const first = t === 0 && announced !== undefined ? queues.indexOf(announced) : -1;
      const got = first >= 0 ? await this.leaseFrom(worker, queues, first, groups) : false;
      if (got) return got === PARKED ? PARKED : queues[first];
      // With many queues, or when there may be no work, one round trip says which hold work and how urgent.
      const heads = announced === undefined || n > PROBE_ABOVE ? await this.opts.bull.heads(queues) : null;
      for (let i = 0; i < n && offersLeases(worker); i++) {
        let k = (worker.cursor + i) % n;
        if (heads ? heads[k].urgency === EMPTY : k === first) continue;
        // A split queue's turn goes to its most urgent partition: priorities and fair shares hold across them.
        if (heads && groups) for (const j of groups[k]) if (moreUrgent(heads[j], heads[k])) k = j;
        const leased = await this.leaseFrom(worker, queues, k, groups);
        if (leased) return leased === PARKED ? PARKED : queues[k];
        if (heads) heads[k] = { urgency: EMPTY };
      }
    }
    return null;
  }

  /** Leases the worker a job of `queues[k]` if it may take one now; true when it did (the cursor then past its partitions), `PARKED` when a split queue's job was parked. */
  private async leaseFrom(worker: ConnectedWorker, queues: string[], k: number, groups?: number[][]): Promise<boolean | typeof PARKED> {
    const queue = queues[k];
    while (offersLeases(worker)) {
      if (coolingOff(worker, queue, Date.now()) || this.atModelLimit(worker, queue)) return false;
      const token = randomUUID();
      const job = await this.opts.bull.fetch(queue, token);
      if (!job) return false;
      const fetchedAt = performance.now();
      worker.cursor = ((groups?.[k]?.at(-1) ?? k) + 1) % queues.length;
      if (await this.startLease(worker, queue, job, token, fetchedAt)) return true;
      if ((groups?.[k]?.length ?? 1) > 1) return PARKED;
      // Parked at a concurrency limit: the queue's next job (another account's) is fetched instead.
    }
    return false;
  }

  /** True when the worker holds as many leases of the queue's model as the model's `max_concurrency`. */
  private atModelLimit(worker: ConnectedWorker, queue: string): boolean {
    const max = worker.modelLimits?.get(queue);
    if (max === undefined) return false;
    const { kind, model } = parseQueueName(queue)!;
    return this.ctx.table.leasesOf(worker, kind, model!) >= max;
  }

  /**
   * Leases a fetched job to `worker`. If that fails before the lease went out (Redis failing
   * under it), the job goes back to its queue at once, its attempt not counted: no worker had it.
   */
  private async startLease(worker: ConnectedWorker, queue: string, job: Job<QueuedJobData>, token: string, fetchedAt: number): Promise<boolean> {
    const progress: LeaseProgress = { sent: false };
    try {
      return (await this.leaseJob(worker, queue, job, token, fetchedAt, progress)) !== false;
    } catch (err) {
      if (!progress.sent) {
        await this.handBack(queue, job, token, progress.started, err);
        await this.ctx.gate?.release(job.data, token);
      }
      throw err;
    }
  }

  /** Puts back a job whose lease never reached a worker: its record as before, its job at the head of its queue. */
  async handBack(queue: string, job: Job<QueuedJobData>, token: string, started: LeaseProgress['started'], cause: unknown): Promise<void> {
    this.opts.log.warn({ err: cause, runId: job.data.run_id, queue }, 'could not hand a job to its worker; it goes back to its queue without counting an attempt');
    try {
      if (started) {
        const { run, prior, fence } = started;
        // A queued run has no timeout_at: requeues clear it.
        const undo = { worker_id: prior.worker_id, attempts: prior.attempts, fence: prior.fence, started_at: prior.started_at, progress: prior.progress, timeout_at: null };
        // Its attempt never happened: its entry goes from the history too.
        await whileUnavailable(() => this.opts.runs.transition(run, { from: ['running'], fence, to: prior.status, set: undo, attempt: { attempt: fence, drop: true } }), this.opts.leaseTtlMs, this.ctx.stopping);
      }
      await this.opts.bull.handBack(queue, job, token);
      await whileUnavailable(() => this.announce(queue), this.opts.leaseTtlMs, this.ctx.stopping);
    } catch (err) {
      this.opts.log.warn({ err, runId: job.data.run_id }, 'could not hand the job back; its lock will lapse and the stalled checker requeues it');
    }
  }

  /** False when the job was parked at a concurrency limit instead. */
  private async leaseJob(worker: ConnectedWorker, queue: string, job: Job<QueuedJobData>, token: string, fetchedAt: number, progress: LeaseProgress): Promise<boolean | void> {
    const attempt = job.attemptsStarted;
    if (attempt > maxAttemptsOf(job.data, this.opts.maxAttempts)) {
      await this.failExhausted(job, token);
      return;
    }
    // Fetched past its ttl_s without ever having started: it fails `expired`, never runs.
    if (await this.ctx.deadlines?.expireFetched(job, token)) return;
    if (this.ctx.gate && !(await this.ctx.gate.admit(queue, job, token))) return false;
    const timeoutAt = job.data.timeout ? Date.now() + job.data.timeout * 1000 : null;
    // One store call, no read first: the transition refuses what is not to be leased and says what it overwrote.
    const started = await this.opts.runs.transition(
      { run_id: job.data.run_id, account_id: job.data.account_id },
      {
        from: ['queued', 'running'],
        to: 'running',
        set: { attempts: attempt, fence: attempt, worker_id: worker.info.worker_id, progress: null, timeout_at: timeoutAt === null ? null : new Date(timeoutAt).toISOString() },
        setIfAbsent: { started_at: new Date().toISOString() },
        attempt: { attempt, worker: this.alias(worker.identity ?? worker.info.worker_id), tier: worker.info.tier, started_at: new Date().toISOString(), ended_at: null, error: null },
        returnPrior: true,
        // The `running` event is queued before the lease goes out, so the worker's output is
        // logged after it; waiting for it to be written would only delay the first token.
        awaitListeners: false,
      },
    );
    if (!started.ok) {
      // Canceled or finished while queued (or a stray re-add): the record wins, the job goes.
      await this.ctx.gate?.release(job.data, token);
      await this.discard(job, token, !started.run || isTerminal(started.run.status) ? 'the run is no longer queued' : 'the run changed state while being leased');
      return;
    }
    const { run, prior } = started;
    if (prior.fence === 0) this.ctx.deadlines?.started(queue, job);
    if (prior.status === 'running') {
      // Still running on its record: the gateway that leased it died and the stalled checker requeued it.
      this.opts.metrics?.leaseLost('gateway_lost');
      this.opts.metrics?.requeued(job.data.kind, job.data.tier);
    }
    progress.started = { run, prior, fence: attempt };
    const { lease, uploadToken } = await this.ctx.table.create({ worker, queue, job, token, fence: attempt, run });
    // The worker signs the hash of the input it was leased; the gateway checks it against the stored input.
    const inputSha256 = run.confidentiality === 'private' ? await inputDigest(run.input, inputFileHashes(run)) : undefined;
    if (run.confidentiality === 'private' && !attestedAt(worker)) {
      // Its evidence lapsed in the instant since the fetch: the run must not reach it. Back to the queue.
      await this.ctx.settlement.loseLease(lease.id, 'its attestation evidence lapsed before the lease went out', 'disconnect', false);
      return;
    }
    worker.send({
      type: 'lease',
      lease_id: lease.id,
      fence: attempt,
      run_id: run.run_id,
      kind: run.kind,
      tier: run.confidentiality,
      attempt,
      input: run.input,
      ...(inputSha256 ? { input_sha256: inputSha256 } : {}),
      upload_token: uploadToken,
      upload_url: leaseUploadUrl(this.opts.publicUrl(), lease.id),
      ...(Object.keys(run.input_files ?? {}).length > 0 && { files: leaseInputFiles(this.opts.publicUrl(), run, lease.id) }),
    });
    progress.sent = true;
    if (timeoutAt !== null) this.ctx.deadlines?.arm(lease, timeoutAt);
    this.opts.log.debug({ runId: run.run_id, leaseId: lease.id, workerId: worker.info.worker_id, attempt }, 'lease sent');
    this.opts.metrics?.leaseSent(job.data.kind, job.data.tier, (performance.now() - fetchedAt) / 1000);
    if (run.cancel_requested_at) worker.send({ type: 'cancel', lease_id: lease.id, run_id: run.run_id });
    // The worker left while this lease was being made: hand it back now rather than at lock expiry.
    if (!this.ctx.attached(worker.info.worker_id)) await this.ctx.settlement.loseLease(lease.id, 'the worker disconnected', 'disconnect');
  }

  /** A job past its last attempt (its earlier leases were lost with their gateway, the stalled checker requeued it): its run fails. Rare, so read first. */
  async failExhausted(job: Job<QueuedJobData>, token: string): Promise<void> {
    const run = await this.opts.runs.get(job.data.run_id);
    if (!run || isTerminal(run.status)) {
      await this.discard(job, token, 'the run is no longer queued');
      return;
    }
    if (run.status === 'running') this.opts.metrics?.leaseLost('gateway_lost');
    await this.ctx.settlement.finish(run, run.fence, job, token, 'failed', { code: 'worker_lost', message: `no worker finished the run in ${maxAttemptsOf(job.data, this.opts.maxAttempts)} attempts`, retryable: false });
    // Its last lease's concurrency slots, held since that lease's gateway died.
    await this.ctx.gate?.release(job.data);
  }

  async discard(job: Job<QueuedJobData>, token: string, why: string): Promise<void> {
    try {
      await job.moveToFailed(new UnrecoverableError(why), token, false);
    } catch (err) {
      if (!isLockLost(err)) throw err;
    }
  }
}
