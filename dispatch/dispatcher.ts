import { randomBytes, randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { UnrecoverableError, type Job } from 'bullmq';
import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import { hashSecret } from '../models/credentials.js';
import { isDatastoreUnavailable } from '../models/errors.js';
import type { RunStore } from '../models/stores.js';
import { isTerminal, type RunError, type RunRecord } from '../models/types.js';
import type { QueuedJobData } from '../queues/job-queues.js';
import { TIERS } from '../models/kinds.js';
import { queueName, queueTier } from '../queues/queue-names.js';
import { AttestationError, inputDigest } from '../sdk/attestation/index.js';
import { BullWorkers, isLockLost } from './bull-workers.js';
import { FleetCounters } from './fleet-counters.js';
import type { DispatchObserver, LeaseLossReason } from './dispatch-observer.js';
import { TIER_RANK, attestedAt, type ConnectedWorker } from './connected-worker.js';
import { LeaseHandover, ownerKey } from './lease-handover.js';
import type { LeaseStore } from './lease-store.js';
import type { ReceiptChecker, RunAttestation } from './receipt-check.js';
import { HANDOVER_PROTOCOL, leaseUploadUrl, type ResumeClaim, type WorkerFrame } from '../sdk/protocol/index.js';
import type { WorkerInfo } from './worker-info.js';

export interface DispatcherOptions {
  /** Command connection (shared with the API). */
  redis: Redis;
  /** A dedicated connection for the wake-up and cancel channels. */
  subscriber: Redis;
  /** Connection for BullMQ's workers (maxRetriesPerRequest: null). */
  bullConnection: Redis;
  prefix: string;
  queuePrefix: string;
  runs: RunStore;
  /** A dead instance's workers leave the fleet counts this long after its last refresh. @defaultValue 15000 */
  fleetTtlMs?: number;
  leases: LeaseStore;
  log: Logger;
  /** Read at each lease: with PORT=0 the public URL is only known once the server listens. */
  publicUrl: () => string;
  /** Leases a run may use; past the last, a lost lease fails it with `worker_lost`. */
  maxAttempts: number;
  gatewayId: string;
  /** @defaultValue 30000 */
  leaseTtlMs?: number;
  /** @defaultValue 5000 */
  heartbeatMs?: number;
  /** Where workers' progress, log lines and streamed output go (the per-run event log). */
  events?: WorkerReportSink;
  /** Told about leases sent, lost and requeued (metrics). */
  metrics?: DispatchObserver;
  /** Checks the receipts of private runs; without it a private run cannot succeed. */
  receipts?: ReceiptChecker;
}

/** What the dispatcher does with a worker's live reports once their lease checks out. */
export interface WorkerReportSink {
  progress(runId: string, progress: number, message?: string): Promise<void>;
  logLine(runId: string, line: string): Promise<void>;
  output(runId: string, delta: string): Promise<void>;
}

/** How far a lease got before it went out: what a failed hand-over must undo. */
interface LeaseProgress {
  /** The run as it was before this lease moved it to `running` (fenced with `fence`). */
  started?: { run: RunRecord; fence: number };
  sent: boolean;
}

interface ActiveLease {
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
}

/**
 * A private job is fetched only for a worker whose evidence stays valid at least this much
 * longer, so that it is still valid when the lease frame goes out a few milliseconds later
 * (which is checked again, strictly, right before sending).
 */
const PRIVATE_LEASE_MARGIN_MS = 1_000;

/** Channels shared by all gateway instances. */
export const dispatchChannels = (prefix: string) => ({ queued: `${prefix}:chan:queued`, cancel: `${prefix}:chan:cancel` });

/**
 * Leases queued jobs to the workers connected to this process. Fetching is event driven: a
 * worker's free slot is filled when it registers or finishes a lease, when any instance
 * announces a job on the `queued` channel, and by a slow safety sweep; nothing polls Redis
 * in a loop. The run record is moved first in every step (it is the fence), BullMQ second.
 */
export class Dispatcher {
  private readonly bull: BullWorkers;
  private readonly handover: LeaseHandover;
  /** The fleet counts every instance reads (capacity, capabilities): rewritten on every change here. */
  readonly fleet: FleetCounters;
  private stopping = false;
  private readonly workers = new Map<string, ConnectedWorker>();
  private readonly active = new Map<string, ActiveLease>();
  private readonly byRun = new Map<string, ActiveLease>();
  private readonly channels: { queued: string; cancel: string };
  private timers: NodeJS.Timeout[] = [];
  private wakeTurn = 0;
  private readonly pendingAnnouncements = new Map<string, { count: number; sent: Promise<void> }>();
  readonly leaseTtlMs: number;
  readonly heartbeatMs: number;

  constructor(private readonly opts: DispatcherOptions) {
    this.leaseTtlMs = opts.leaseTtlMs ?? 30_000;
    this.heartbeatMs = opts.heartbeatMs ?? 5_000;
    this.bull = new BullWorkers({ connection: opts.bullConnection, prefix: opts.queuePrefix, lockMs: this.leaseTtlMs, log: opts.log });
    this.channels = dispatchChannels(opts.prefix);
    this.handover = new LeaseHandover({ leases: opts.leases, runs: opts.runs, bull: this.bull, gatewayId: opts.gatewayId, leaseTtlMs: this.leaseTtlMs });
    this.fleet = new FleetCounters({ redis: opts.redis, prefix: opts.prefix, gatewayId: opts.gatewayId, ttlMs: opts.fleetTtlMs ?? 15_000, workers: () => this.workers.values(), log: opts.log });
  }

  async start(): Promise<void> {
    await this.opts.subscriber.subscribe(this.channels.queued, this.channels.cancel);
    this.opts.subscriber.on('message', (channel: string, message: string) => {
      if (channel === this.channels.queued) {
        const [queue, count] = message.split(' ');
        this.wake(queue, Number(count) || 1);
      }
      else if (channel === this.channels.cancel) this.cancelLocal(message);
    });
    // After a subscriber reconnect, announcements may have been missed: look at every queue.
    this.opts.subscriber.on('ready', () => this.wakeAll());
    const sweep = setInterval(() => this.wakeAll(), Math.max(1000, this.leaseTtlMs / 3));
    const refresh = setInterval(() => this.refreshFleet(), Math.max(500, Math.floor((this.opts.fleetTtlMs ?? 15_000) / 3)));
    this.timers = [sweep, refresh];
    for (const t of this.timers) t.unref();
  }

  /**
   * Lets every worker go without losing or repeating work. Workers speaking protocol 2 are
   * told `reconnect`: they close, come back through the load balancer to another instance and
   * resume their leases there (`adopt`), so their leases are handed over, never requeued;
   * they get `handoverMs` to close before their sockets are closed for them. Older workers are
   * told `drain` (finish, take nothing new, reconnect elsewhere) and get up to `drainMs`;
   * whatever they still hold then goes back to its queue when the sockets close.
   */
  async stop(drainMs = 0, handoverMs = 5_000): Promise<void> {
    this.stopping = true;
    for (const t of this.timers) clearInterval(t);
    for (const w of this.workers.values()) this.letGo(w);
    const started = Date.now();
    const waiting = (w: ConnectedWorker) => (w.handover ? Date.now() - started < handoverMs : w.leases.size > 0 && Date.now() - started < drainMs);
    while ([...this.workers.values()].some(waiting)) await new Promise((r) => setTimeout(r, 50));
    await Promise.all([...this.workers.values()].map((w) => this.detach(w, 1012, 'gateway restarting; reconnect', 'shutdown')));
    // The subscriber is shared (run events, trust changes) and HTTP may still be draining: only our channels go.
    await this.opts.subscriber.unsubscribe(this.channels.queued, this.channels.cancel).catch(() => {});
    await this.fleet.stop();
    await this.bull.close();
  }


  // ---- workers coming and going -------------------------------------------------------------

  /** Asks a worker to leave this stopping instance: to move its leases elsewhere if it can, else to finish them. */
  private letGo(worker: ConnectedWorker): void {
    worker.draining = true;
    if ((worker.protocol ?? 1) >= HANDOVER_PROTOCOL) {
      worker.handover = true;
      worker.send({ type: 'reconnect' });
    } else {
      worker.send({ type: 'drain' });
    }
  }

  /** A registered worker joins: it is counted in the fleet and offered work. */
  async attach(worker: ConnectedWorker): Promise<void> {
    const { info } = worker;
    for (const id of worker.leases) {
      const lease = this.active.get(id);
      if (lease?.cancelOnAttach) worker.send({ type: 'cancel', lease_id: id, run_id: lease.runId });
    }
    if (this.stopping) this.letGo(worker);
    this.opts.log.info({ workerId: info.worker_id, kinds: info.kinds.length, tier: info.tier, slots: info.slots, resumed: worker.leases.size }, 'worker attached');
    const tiers = worker.tiers ?? TIERS.filter((t) => TIER_RANK[t] <= TIER_RANK[info.tier]).sort((a, b) => TIER_RANK[b] - TIER_RANK[a]);
    worker.tiers = tiers;
    worker.queues = tiers.map((tier) => info.kinds.map((kind) => queueName(kind, tier)));
    this.workers.set(info.worker_id, worker);
    if (worker.attestation) {
      info.attested_until = worker.attestation.current?.expires_at ?? null;
      info.fallback_tier = tiers.find((t) => t !== 'private') ?? 'open';
    }
    this.fleet.changed();
    void this.fill(worker);
  }

  /** Offers work to an attached worker now (a private worker that presented fresh evidence). */
  offer(worker: ConnectedWorker): void {
    if (this.workers.get(worker.info.worker_id) !== worker) return;
    // The fleet views (capabilities, capacity) count it as private again at once.
    worker.info.attested_until = worker.attestation?.current?.expires_at ?? null;
    this.fleet.changed();
    void this.fill(worker);
  }

  /** The workers connected to this process, as registered (`busy` kept current). */
  localWorkers(): WorkerInfo[] {
    return [...this.workers.values()].map((w) => w.info);
  }

  /** This process's registered workers of one token owner (a trust change closes some: TrustEnforcer). */
  workersOf(owner: WorkerInfo['owner']): ConnectedWorker[] {
    return [...this.workers.values()].filter((w) => w.info.owner.type === owner.type && w.info.owner.id === owner.id);
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
      const lease: ActiveLease = { id: record.lease_id, fence: record.fence, runId: record.run_id, accountId: record.account_id, queue: record.queue, token: record.lock_token, job, worker, closing: false, cancelOnAttach: outcome.cancelRequested };
      this.active.set(lease.id, lease);
      this.byRun.set(lease.runId, lease);
      worker.leases.add(lease.id);
      resumed.push(lease.id);
      this.opts.log.info({ runId: lease.runId, leaseId: lease.id, workerId: worker.info.worker_id }, 'lease adopted');
    }
    for (const claim of claims.slice(worker.info.slots)) lost.push(claim.lease_id);
    worker.info.busy = worker.leases.size;
    this.fleet.changed();
    return { resumed, lost };
  }

  /**
   * A lease whose worker is taking it to another instance: forgotten here, while its record
   * and BullMQ lock stay in Redis for the adopter. One being settled here finishes here.
   */
  private handOver(leaseId: string): void {
    const lease = this.active.get(leaseId);
    if (!lease || lease.closing) return;
    this.active.delete(leaseId);
    if (this.byRun.get(lease.runId) === lease) this.byRun.delete(lease.runId);
    lease.worker.leases.delete(leaseId);
    lease.worker.info.busy = lease.worker.leases.size;
    this.fleet.changed();
    this.opts.log.info({ runId: lease.runId, leaseId, workerId: lease.worker.info.worker_id }, 'lease handed over');
  }

  /** A worker leaves (closed socket, missed heartbeats, shutdown): its leases are lost, or handed over if it was told to move. */
  async detach(worker: ConnectedWorker, code = 1000, reason = 'bye', loss: LeaseLossReason = 'disconnect'): Promise<void> {
    if (!this.workers.delete(worker.info.worker_id)) return;
    // Gone from the fleet's counts now, before its leases are settled.
    this.fleet.changed();
    worker.draining = true;
    worker.attestation?.close();
    try {
      worker.close(code, reason);
    } catch {
      // already closed
    }
    if (worker.handover) for (const id of [...worker.leases]) this.handOver(id);
    else await Promise.all([...worker.leases].map((id) => this.loseLease(id, 'the worker disconnected', loss)));
    this.opts.log.info({ workerId: worker.info.worker_id, code, handover: !!worker.handover }, 'worker detached');
  }

  /** Heartbeat: extends the worker's leases. */
  async heartbeat(worker: ConnectedWorker): Promise<void> {
    const byQueue = new Map<string, ActiveLease[]>();
    for (const id of worker.leases) {
      const lease = this.active.get(id);
      if (lease) byQueue.set(lease.queue, [...(byQueue.get(lease.queue) ?? []), lease]);
    }
    await Promise.all(
      [...byQueue].map(async ([queue, leases]) => {
        const lost = await this.bull.extend(queue, leases.map((l) => l.job.id!), leases.map((l) => l.token));
        await this.opts.leases.touch(leases.map((l) => l.id), this.leaseTtlMs);
        for (const lease of leases) if (lost.includes(lease.job.id!)) await this.loseLease(lease.id, 'its lock lapsed', 'heartbeat');
      }),
    );
  }

  /** Rewrites this instance's fleet counts before they expire (and with any evidence renewed meanwhile). */
  private refreshFleet(): void {
    for (const w of this.workers.values()) if (w.attestation) w.info.attested_until = w.attestation.current?.expires_at ?? null;
    this.fleet.changed();
  }

  // ---- filling free slots ---------------------------------------------------------------------

  /** Announces a queued job to every instance's dispatcher. */
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
          this.opts.redis.publish(this.channels.queued, `${queue} ${entry.count}`).then(() => resolve(), reject);
        }),
      );
      this.pendingAnnouncements.set(queue, entry);
      pending = entry;
    }
    pending.count++;
    return pending.sent;
  }

  /**
   * `count` announced jobs wake up to `count` local workers that can take them (taking turns),
   * not all of them: waking every worker would cost a fetch each, most finding the queue empty.
   */
  private wake(queue: string, count: number): void {
    const now = Date.now();
    const candidates = [...this.workers.values()].filter(
      (w) => !w.draining && w.leases.size < w.info.slots && w.queues.some((tier) => tier.includes(queue)) && (queueTier(queue) !== 'private' || attestedAt(w, now)),
    );
    for (let i = 0; i < Math.min(count, candidates.length); i++) void this.fill(candidates[this.wakeTurn++ % candidates.length]);
  }

  private wakeAll(): void {
    for (const w of this.workers.values()) void this.fill(w);
  }

  /** Leases jobs to `worker` until its slots are full or no queue it serves has work. */
  private async fill(worker: ConnectedWorker): Promise<void> {
    if (worker.filling) {
      worker.refill = true;
      return;
    }
    worker.filling = true;
    try {
      do {
        worker.refill = false;
        while (!worker.draining && worker.leases.size < worker.info.slots && this.workers.has(worker.info.worker_id)) {
          if (!(await this.leaseOne(worker))) break;
        }
      } while (worker.refill && !worker.draining);
    } catch (err) {
      this.opts.log.warn({ err, workerId: worker.info.worker_id }, 'filling a worker failed; the safety sweep retries');
    } finally {
      worker.filling = false;
    }
  }

  /**
   * Tries the worker's queues, its own tier first (a weaker tier's job is taken only when its
   * own tier has none), and within a tier starting at the cursor so kinds take turns.
   * True if it leased a job.
   */
  private async leaseOne(worker: ConnectedWorker): Promise<boolean> {
    for (const [t, queues] of worker.queues.entries()) {
      // Private work only while the worker's evidence is valid: checked now, at every lease.
      if (worker.tiers?.[t] === 'private' && !attestedAt(worker, Date.now() + PRIVATE_LEASE_MARGIN_MS)) continue;
      const n = queues.length;
      for (let i = 0; i < n && !worker.draining; i++) {
        const k = (worker.cursor + i) % n;
        const token = randomUUID();
        const job = await this.bull.fetch(queues[k], token);
        if (!job) continue;
        const fetchedAt = performance.now();
        worker.cursor = (k + 1) % n;
        await this.startLease(worker, queues[k], job, token, fetchedAt);
        return true;
      }
    }
    return false;
  }

  /**
   * Leases a fetched job to `worker`. If that fails before the lease went out (Redis failing
   * under it), the job goes back to its queue at once, its attempt not counted: no worker had it.
   */
  private async startLease(worker: ConnectedWorker, queue: string, job: Job<QueuedJobData>, token: string, fetchedAt: number): Promise<void> {
    const progress: LeaseProgress = { sent: false };
    try {
      await this.leaseJob(worker, queue, job, token, fetchedAt, progress);
    } catch (err) {
      if (!progress.sent) await this.handBack(queue, job, token, progress.started, err);
      throw err;
    }
  }

  /** Puts back a job whose lease never reached a worker: its record as before, its job at the head of its queue. */
  private async handBack(queue: string, job: Job<QueuedJobData>, token: string, started: LeaseProgress['started'], cause: unknown): Promise<void> {
    this.opts.log.warn({ err: cause, runId: job.data.run_id, queue }, 'could not hand a job to its worker; it goes back to its queue without counting an attempt');
    try {
      if (started) {
        const { run, fence } = started;
        const undo = { worker_id: run.worker_id ?? null, attempts: run.attempts, fence: run.fence, started_at: run.started_at, progress: run.progress };
        await this.whileUnavailable(() => this.opts.runs.transition(run, { from: ['running'], fence, to: run.status, set: undo }));
      }
      await this.bull.handBack(queue, job, token);
      await this.whileUnavailable(() => this.announce(queue));
    } catch (err) {
      this.opts.log.warn({ err, runId: job.data.run_id }, 'could not hand the job back; its lock will lapse and the stalled checker requeues it');
    }
  }

  /** Runs `fn` again while the datastore is unavailable, for at most a lease TTL (then locks lapse anyway). */
  private async whileUnavailable<T>(fn: () => Promise<T>): Promise<T> {
    const deadline = Date.now() + this.leaseTtlMs;
    for (let delay = 50; ; delay = Math.min(delay * 2, 1_000)) {
      try {
        return await fn();
      } catch (err) {
        if (!isDatastoreUnavailable(err) || this.stopping || Date.now() + delay > deadline) throw err;
        await sleep(delay);
      }
    }
  }

  private async leaseJob(worker: ConnectedWorker, queue: string, job: Job<QueuedJobData>, token: string, fetchedAt: number, progress: LeaseProgress): Promise<void> {
    const run = await this.opts.runs.get(job.data.run_id);
    const attempt = job.attemptsStarted;
    if (!run || isTerminal(run.status)) {
      // Canceled or finished while queued (or a stray re-add): the record wins, the job goes.
      await this.discard(job, token, 'the run is no longer queued');
      return;
    }
    if (run.status === 'running') {
      // Still running on its record: the gateway that leased it died and the stalled checker requeued it.
      this.opts.metrics?.leaseLost('gateway_lost');
      if (attempt <= this.opts.maxAttempts) this.opts.metrics?.requeued(job.data.kind, job.data.tier);
    }
    if (attempt > this.opts.maxAttempts) {
      // Its earlier leases were lost with their gateway (the stalled checker requeued it).
      await this.finish(run, run.fence, job, token, 'failed', { code: 'worker_lost', message: `no worker finished the run in ${this.opts.maxAttempts} attempts`, retryable: false });
      return;
    }
    const now = new Date().toISOString();
    const started = await this.opts.runs.transition(run, {
      from: ['queued', 'running'],
      to: 'running',
      set: { started_at: run.started_at ?? now, attempts: attempt, fence: attempt, worker_id: worker.info.worker_id, progress: null },
    });
    if (!started.ok) {
      await this.discard(job, token, 'the run changed state while being leased');
      return;
    }
    progress.started = { run, fence: attempt };
    const lease: ActiveLease = { id: `lse_${randomBytes(16).toString('hex')}`, fence: attempt, runId: run.run_id, accountId: run.account_id, queue, token, job, worker, closing: false };
    const uploadToken = randomBytes(32).toString('base64url');
    await this.opts.leases.put(
      {
        lease_id: lease.id,
        run_id: run.run_id,
        account_id: run.account_id,
        worker_id: worker.info.worker_id,
        kind: run.kind,
        tier: run.confidentiality,
        fence: attempt,
        upload_hash: hashSecret(uploadToken),
        gateway_id: this.opts.gatewayId,
        queue,
        job_id: job.id!,
        lock_token: token,
        owner: ownerKey(worker.info.owner),
      },
      this.leaseTtlMs,
    );
    this.active.set(lease.id, lease);
    this.byRun.set(run.run_id, lease);
    worker.leases.add(lease.id);
    worker.info.busy = worker.leases.size;
    this.fleet.changed();
    // The worker signs the hash of the input it was leased; the gateway checks it against the stored input.
    const inputSha256 = run.confidentiality === 'private' ? await inputDigest(run.input) : undefined;
    if (run.confidentiality === 'private' && !attestedAt(worker)) {
      // Its evidence lapsed in the instant since the fetch: the run must not reach it. Back to the queue.
      await this.loseLease(lease.id, 'its attestation evidence lapsed before the lease went out', 'disconnect', false);
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
    });
    progress.sent = true;
    this.opts.log.debug({ runId: run.run_id, leaseId: lease.id, workerId: worker.info.worker_id, attempt }, 'lease sent');
    this.opts.metrics?.leaseSent(job.data.kind, job.data.tier, (performance.now() - fetchedAt) / 1000);
    if (started.run.cancel_requested_at) worker.send({ type: 'cancel', lease_id: lease.id, run_id: run.run_id });
    // The worker left while this lease was being made: hand it back now rather than at lock expiry.
    if (!this.workers.has(worker.info.worker_id)) await this.loseLease(lease.id, 'the worker disconnected', 'disconnect');
  }

  private async discard(job: Job<QueuedJobData>, token: string, why: string): Promise<void> {
    try {
      await job.moveToFailed(new UnrecoverableError(why), token, false);
    } catch (err) {
      if (!isLockLost(err)) throw err;
    }
  }

  // ---- reports from workers -------------------------------------------------------------------

  /** Handles a lease frame; returns the error frame to send, or null (acknowledged). */
  async report(worker: ConnectedWorker, frame: Extract<WorkerFrame, { lease_id: string }>): Promise<{ code: string; message: string } | null> {
    const lease = this.active.get(frame.lease_id);
    if (!lease || lease.worker !== worker || lease.fence !== frame.fence || lease.closing) {
      return { code: 'stale_lease', message: 'this lease is no longer yours: drop its work' };
    }
    const run = { run_id: lease.runId, account_id: lease.accountId };
    switch (frame.type) {
      case 'progress': {
        const t = await this.opts.runs.transition(run, { from: ['running'], fence: lease.fence, set: { progress: frame.progress } });
        if (!t.ok) return { code: 'stale_lease', message: 'the run is no longer leased to you' };
        await this.opts.events?.progress(run.run_id, frame.progress, frame.message);
        return null;
      }
      case 'log':
        await this.opts.events?.logLine(run.run_id, frame.line);
        return null;
      case 'output':
        await this.opts.events?.output(run.run_id, frame.delta);
        return null;
      case 'complete':
        lease.closing = true;
        return this.settle(lease, 'succeeded', null, frame.output, frame.receipt);
      case 'fail': {
        lease.closing = true;
        return this.settle(lease, 'fail', frame.error);
      }
    }
  }

  /** Ends a lease the way its worker said; refused (stale) if the record moved on under another lease. */
  private async settle(
    lease: ActiveLease,
    reported: 'succeeded' | 'fail',
    error: RunError | null,
    output?: RunRecord['output'],
    receipt?: string,
  ): Promise<{ code: string; message: string } | null> {
    // On a datastore error the lease stays open: the worker sends its report again (docs/worker-protocol.md).
    let retryable = false;
    try {
      const run = await this.opts.runs.get(lease.runId);
      if (run && run.fence === lease.fence && run.status === 'succeeded' && reported === 'succeeded') {
        // This very report succeeded the run before, but its answer was lost to an outage: acknowledge it again.
        await lease.job.moveToCompleted(output ?? null, lease.token, false).catch(() => {});
        return null;
      }
      if (!run || run.fence !== lease.fence || run.status !== 'running') return { code: 'stale_lease', message: 'the run is no longer leased to you' };
      let attestation: RunAttestation | undefined;
      if (reported === 'succeeded' && run.confidentiality === 'private') {
        const checked = await this.checkReceipt(run, lease, output, receipt);
        if ('refused' in checked) return checked.refused;
        attestation = checked.attestation;
      }
      // A worker's failure: `canceled` ends a run the caller canceled; otherwise retryable or final.
      const outcome = reported === 'succeeded' ? 'succeeded' : error!.code === 'canceled' && run.cancel_requested_at ? 'canceled' : error!.retryable ? 'retry' : 'failed';
      this.opts.log.debug({ runId: run.run_id, leaseId: lease.id, outcome, code: error?.code }, 'lease reported');
      if (outcome === 'retry') await this.requeueOrFail(run, lease, error!);
      else {
        const ok = await this.finish(run, lease.fence, lease.job, lease.token, outcome, error, output, attestation);
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
   * A private run's receipt, checked before the run may succeed. A bad or missing one fails the
   * attempt as retryable (requeued; on the last attempt the run fails with `receipt_invalid`),
   * and the worker is told why.
   */
  private async checkReceipt(run: RunRecord, lease: ActiveLease, output: RunRecord['output'] | undefined, receipt: string | undefined): Promise<{ attestation: RunAttestation } | { refused: { code: string; message: string } }> {
    try {
      if (!this.opts.receipts) throw new AttestationError('malformed', 'this gateway cannot check receipts');
      const evidence = lease.worker.attestation?.evidence() ?? [];
      return { attestation: await this.opts.receipts.check({ run, leaseId: lease.id, workerId: lease.worker.info.worker_id, evidence, urls: output?.urls ?? [], receipt }) };
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

  /** A retryable end: back to the queue while attempts remain, else a final failure. */
  private async requeueOrFail(run: RunRecord, lease: ActiveLease, error: RunError): Promise<void> {
    if (run.cancel_requested_at) {
      await this.finish(run, lease.fence, lease.job, lease.token, 'canceled', { code: 'canceled', message: 'canceled by the caller', retryable: false });
      return;
    }
    const attemptsLeft = lease.job.attemptsStarted < this.opts.maxAttempts;
    if (!attemptsLeft) {
      await this.finish(run, lease.fence, lease.job, lease.token, 'failed', { ...error, retryable: false });
      return;
    }
    const back = await this.opts.runs.transition(run, { from: ['running'], fence: lease.fence, to: 'queued', set: { worker_id: null, progress: null } });
    if (!back.ok) return;
    this.opts.metrics?.requeued(lease.job.data.kind, lease.job.data.tier);
    try {
      await lease.job.moveToFailed(new Error(`${error.code}: ${error.message}`), lease.token, false);
    } catch (err) {
      // Lock gone: the stalled checker requeues the job instead.
      if (!isLockLost(err)) throw err;
    }
    await this.announce(lease.queue);
  }

  /** Makes the run terminal (the store settles its credits once), then completes or fails its job. */
  private async finish(
    run: RunRecord,
    fence: number,
    job: Job<QueuedJobData>,
    token: string,
    status: 'succeeded' | 'failed' | 'canceled',
    error: RunError | null,
    output?: RunRecord['output'],
    attestation?: RunAttestation,
  ): Promise<boolean> {
    const now = new Date().toISOString();
    // A private run's attestation is written by the very transition that makes it succeed.
    const succeeded = { output: output ?? { urls: [] }, progress: 1, finished_at: now, error: null, ...(attestation ? { attestation: { ...attestation } } : {}) };
    const t = await this.opts.runs.transition(run, {
      from: ['running', 'queued'],
      fence,
      to: status,
      set: status === 'succeeded' ? succeeded : { error, finished_at: now },
    });
    if (!t.ok) return false;
    try {
      if (status === 'succeeded') await job.moveToCompleted(output ?? null, token, false);
      else await job.moveToFailed(new UnrecoverableError(error?.message ?? status), token, false);
    } catch (err) {
      // The record is final; a job whose lock is gone is dropped when next leased.
      if (!isLockLost(err)) this.opts.log.warn({ err, runId: run.run_id }, 'could not finish the BullMQ job');
    }
    return true;
  }

  private async release(lease: ActiveLease): Promise<void> {
    this.active.delete(lease.id);
    if (this.byRun.get(lease.runId) === lease) this.byRun.delete(lease.runId);
    lease.worker.leases.delete(lease.id);
    lease.worker.info.busy = lease.worker.leases.size;
    this.fleet.changed();
    await this.opts.leases.delete(lease.id).catch(() => {});
    void this.fill(lease.worker);
  }

  /** A lease whose worker is gone: requeue (attempt + 1), cancel if asked, or fail on the last attempt. */
  private async loseLease(leaseId: string, why: string, reason: LeaseLossReason, sent = true): Promise<void> {
    const lease = this.active.get(leaseId);
    if (!lease || lease.closing) return;
    lease.closing = true;
    try {
      const run = await this.opts.runs.get(lease.runId);
      if (!run || run.fence !== lease.fence || run.status !== 'running') return;
      this.opts.log.info({ runId: run.run_id, leaseId, why }, 'lease lost');
      this.opts.metrics?.leaseLost(reason);
      await this.requeueOrFail(run, lease, { code: 'worker_lost', message: `the worker was lost: ${why}`, retryable: true });
    } catch (err) {
      this.opts.log.warn({ err, runId: lease.runId, leaseId }, 'could not hand back a lost lease; its lock will lapse and the stalled checker requeues it');
    } finally {
      // A worker still attached (lock lapsed under it) stops computing a run that now runs elsewhere.
      if (sent && this.workers.get(lease.worker.info.worker_id) === lease.worker) {
        lease.worker.send({ type: 'error', code: 'stale_lease', lease_id: lease.id, run_id: lease.runId, message: `this lease was lost (${why}): drop its work` });
      }
      await this.release(lease);
    }
  }

  // ---- cancel ---------------------------------------------------------------------------------

  /** Tells whichever instance holds the run's lease to cancel it. */
  async requestCancel(runId: string): Promise<void> {
    await this.opts.redis.publish(this.channels.cancel, runId);
  }

  private cancelLocal(runId: string): void {
    const lease = this.byRun.get(runId);
    if (lease && !lease.closing) lease.worker.send({ type: 'cancel', lease_id: lease.id, run_id: runId });
  }
}
