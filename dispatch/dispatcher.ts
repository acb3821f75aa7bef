import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import type { RunStore } from '../models/stores.js';
import { TIERS } from '../models/kinds.js';
import { queueName } from '../queues/queue-names.js';
import { BullWorkers } from './bull-workers.js';
import { FleetCounters } from './fleet-counters.js';
import type { DispatchObserver, LeaseLossReason } from './dispatch-observer.js';
import { TIER_RANK, type ConnectedWorker } from './connected-worker.js';
import { LeaseScheduler } from './lease-scheduler.js';
import { LeaseSettlement, type WorkerReportSink } from './lease-settlement.js';
import type { LeaseStore } from './lease-store.js';
import type { ReceiptChecker } from './receipt-check.js';
import { HANDOVER_PROTOCOL, type ResumeClaim, type WorkerFrame } from './worker-frames.js';
import type { WorkerInfo } from './worker-info.js';

export type { WorkerReportSink } from './lease-settlement.js';

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
  private readonly settlement: LeaseSettlement;
  private readonly scheduler: LeaseScheduler;
  /** The fleet counts every instance reads (capacity, capabilities): rewritten on every change here. */
  readonly fleet: FleetCounters;
  private stopping = false;
  private readonly workers = new Map<string, ConnectedWorker>();
  private readonly channels: { queued: string; cancel: string };
  private timers: NodeJS.Timeout[] = [];
  readonly leaseTtlMs: number;
  readonly heartbeatMs: number;

  constructor(private readonly opts: DispatcherOptions) {
    this.leaseTtlMs = opts.leaseTtlMs ?? 30_000;
    this.heartbeatMs = opts.heartbeatMs ?? 5_000;
    this.bull = new BullWorkers({ connection: opts.bullConnection, prefix: opts.queuePrefix, lockMs: this.leaseTtlMs, log: opts.log });
    this.channels = dispatchChannels(opts.prefix);
    this.fleet = new FleetCounters({ redis: opts.redis, prefix: opts.prefix, gatewayId: opts.gatewayId, ttlMs: opts.fleetTtlMs ?? 15_000, workers: () => this.workers.values(), log: opts.log });
    this.settlement = new LeaseSettlement(
      { fill: (w) => this.scheduler.fill(w), announce: (q) => this.scheduler.announce(q), attached: (id) => this.workers.get(id) },
      {
        runs: opts.runs,
        leases: opts.leases,
        bull: this.bull,
        fleet: this.fleet,
        log: opts.log,
        maxAttempts: opts.maxAttempts,
        gatewayId: opts.gatewayId,
        leaseTtlMs: this.leaseTtlMs,
        events: opts.events,
        metrics: opts.metrics,
        receipts: opts.receipts,
      },
    );
    this.scheduler = new LeaseScheduler(
      { workers: () => this.workers.values(), attached: (id) => this.workers.get(id), stopping: () => this.stopping, settlement: this.settlement },
      {
        redis: opts.redis,
        channel: this.channels.queued,
        runs: opts.runs,
        leases: opts.leases,
        bull: this.bull,
        log: opts.log,
        maxAttempts: opts.maxAttempts,
        gatewayId: opts.gatewayId,
        leaseTtlMs: this.leaseTtlMs,
        publicUrl: opts.publicUrl,
        metrics: opts.metrics,
      },
    );
  }

  async start(): Promise<void> {
    await this.opts.subscriber.subscribe(this.channels.queued, this.channels.cancel);
    this.opts.subscriber.on('message', (channel: string, message: string) => {
      if (channel === this.channels.queued) {
        const [queue, count] = message.split(' ');
        this.scheduler.wake(queue, Number(count) || 1);
      }
      else if (channel === this.channels.cancel) this.settlement.cancelLocal(message);
    });
    // After a subscriber reconnect, announcements may have been missed: look at every queue.
    this.opts.subscriber.on('ready', () => this.scheduler.wakeAll());
    const sweep = setInterval(() => this.scheduler.wakeAll(), Math.max(1000, this.leaseTtlMs / 3));
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
      const lease = this.settlement.get(id);
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
    void this.scheduler.fill(worker);
  }

  /** Offers work to an attached worker now (a private worker that presented fresh evidence). */
  offer(worker: ConnectedWorker): void {
    if (this.workers.get(worker.info.worker_id) !== worker) return;
    // The fleet views (capabilities, capacity) count it as private again at once.
    worker.info.attested_until = worker.attestation?.current?.expires_at ?? null;
    this.fleet.changed();
    void this.scheduler.fill(worker);
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
  adopt(worker: ConnectedWorker, claims: ResumeClaim[]): Promise<{ resumed: string[]; lost: string[] }> {
    return this.settlement.adopt(worker, claims);
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
    if (worker.handover) for (const id of [...worker.leases]) this.settlement.handOver(id);
    else await Promise.all([...worker.leases].map((id) => this.settlement.loseLease(id, 'the worker disconnected', loss)));
    this.opts.log.info({ workerId: worker.info.worker_id, code, handover: !!worker.handover }, 'worker detached');
  }

  /** Heartbeat: extends the worker's leases. */
  heartbeat(worker: ConnectedWorker): Promise<void> {
    return this.settlement.heartbeat(worker);
  }

  /** Rewrites this instance's fleet counts before they expire (and with any evidence renewed meanwhile). */
  private refreshFleet(): void {
    for (const w of this.workers.values()) if (w.attestation) w.info.attested_until = w.attestation.current?.expires_at ?? null;
    this.fleet.changed();
  }

  /**
   * Announces queued jobs to every instance's dispatcher. Announcements made in the same tick
   * are coalesced per queue into one message carrying their count: under a burst of
   * submissions this is one PUBLISH per queue per tick, not one per job.
   */
  announce(queue: string): Promise<void> {
    return this.scheduler.announce(queue);
  }

  // ---- reports from workers -------------------------------------------------------------------

  /** Handles a lease frame; returns the error frame to send, or null (acknowledged). */
  report(worker: ConnectedWorker, frame: Extract<WorkerFrame, { lease_id: string }>): Promise<{ code: string; message: string } | null> {
    return this.settlement.report(worker, frame);
  }

  // ---- cancel ---------------------------------------------------------------------------------

  /** Tells whichever instance holds the run's lease to cancel it. */
  async requestCancel(runId: string): Promise<void> {
    await this.opts.redis.publish(this.channels.cancel, runId);
  }
}
