import { pubsub } from '../models/redis-pubsub.js';
import type { RunDurability } from '../models/run-durability.js';
import { RedisKeys } from '../models/redis/keys.js';
import type { RedisClient } from '../models/redis-connection.js';
import type { Logger } from 'pino';
import type { ArtifactStore } from '../models/artifact-store.js';
import type { ModelStore, RankConflict, RunStore } from '../models/stores.js';
import type { WorkerModels } from '../sdk/protocol/index.js';
import { BullWorkers } from './bull-workers.js';
import { ConcurrencyGate, type ConcurrencyGateOptions } from './concurrency-gate.js';
import type { ConnectedWorker } from './connected-worker.js';
import type { DispatchObserver, LeaseLossReason } from './dispatch-observer.js';
import { FleetCounters } from './fleet-counters.js';
import { LeaseScheduler } from './lease-scheduler.js';
import { LeaseSettlement, type WorkerReportSink } from './lease-settlement.js';
import type { LeaseStore } from './lease-store.js';
import { LeaseTable } from './lease-table.js';
import type { ReceiptChecker } from './receipt-check.js';
import type { ResumeClaim, WorkerFrame } from '../sdk/protocol/index.js';
import type { WorkerInfo } from './worker-info.js';
import { RetryPolicy } from './retry-policy.js';
import { WorkerIdentities } from './worker-identities.js';
import { WorkerPool } from './worker-pool.js';
import { Pipelines } from './pipelines/pipelines.js';
import { workerAliases } from './worker-alias.js';
import type { QueuePartitionCounts } from '../queues/queue-partition-counts.js';
import { RunDeadlines } from './run-deadlines.js';
import type { ErrorFrame } from '../sdk/protocol/index.js';

export type { WorkerReportSink } from './lease-settlement.js';

export interface DispatcherOptions {
  /** REDIS_WAIT_REPLICAS: settles wait for their writes to reach the replicas before a worker is acknowledged. */
  replicas?: Pick<RunDurability, 'settled'>;
  /** Command connection (shared with the API). */
  redis: RedisClient;
  /** A dedicated connection for the wake-up and cancel channels. */
  subscriber: RedisClient;
  /** Connection for BullMQ's workers (maxRetriesPerRequest: null). */
  bullConnection: RedisClient;
  prefix: string;
  /** Each queue's BullMQ key prefix (`RedisKeys.queuePrefixOf`). */
  queuePrefixOf: (queue: string) => string;
  runs: RunStore;
  /** A dead instance's workers leave the fleet counts this long after its last refresh. @defaultValue 5000 */
  fleetTtlMs?: number;
  leases: LeaseStore;
  log: Logger;
  /** Read at each lease: with PORT=0 the public URL is only known once the server listens. */
  publicUrl: () => string;
  /** Leases a run may use unless its job says (`max_attempts`); past the last, a lost lease fails it with `worker_lost`. */
  maxAttempts: number;
  /** Keys the opaque worker ids of attempt histories (worker-alias.ts); instances sharing a store share it. */
  workerAliasKey?: Buffer;
  /** After a worker's retryable failure: the first backoff (doubling per attempt) and its cap (RetryPolicy). */
  retryBackoffMs?: number;
  retryBackoffMaxMs?: number;
  /** The artifacts workers upload: a succeeded run's `output.files` is read from their records. */
  artifacts: ArtifactStore;
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
  /** The model catalogue: every model a worker advertises is recorded there (docs/models.md); ranked models' counts are read there. */
  catalogue?: Pick<ModelStore, 'advertise' | 'get'>;
  /** Bytes of activation frames held for one receiving rank before its senders wait (RANK_BUFFER_BYTES). @defaultValue 4 MiB */
  rankBufferBytes?: number;
  /** QUEUE_PARTITIONS: every partition count jobs were queued under, whose partitions are drained (`JobQueues`'). Absent: queues are not split. */
  partitions?: Pick<QueuePartitionCounts, 'all' | 'refresh'>;
  /** Concurrency limits (docs/jobs.md, "Limits and fairness"): where they are read, and the defaults. Absent: none. */
  limits?: Pick<ConcurrencyGateOptions, 'accounts' | 'apiKeys' | 'accountMaxRunning' | 'keyMaxRunning' | 'cacheMs'>;
}

/** Channels shared by all gateway instances. */
export const dispatchChannels = (prefix: string) => {
  const keys = new RedisKeys(prefix);
  return { queued: keys.queuedChannel(), cancel: keys.cancelChannel(), workers: keys.workersChannel() };
};

/**
 * Leases queued jobs to the workers connected to this process. Fetching is event driven: a
 * worker's free slot is filled when it registers or finishes a lease, when any instance
 * announces a job on the `queued` channel, and by a slow safety sweep; nothing polls Redis
 * in a loop. The run record is moved first in every step (it is the fence), BullMQ second.
 *
 * The work is split where the state divides: `WorkerPool` owns the attached workers,
 * `LeaseTable` the leases held here and their records (made, extended, adopted, handed over,
 * ended), `LeaseScheduler` the wake-up bookkeeping (fetching jobs and making leases in the
 * table), `LeaseSettlement` every way a lease ends (reports, losses). Calls go one way: the
 * scheduler and settlement call the table, which calls neither. This class wires them to each
 * other and to Redis, and is the only one the rest of the gateway sees.
 */
export class Dispatcher {
  /** The fleet counts every instance reads (capacity, capabilities): rewritten on every change here. */
  readonly fleet: FleetCounters;
  readonly leaseTtlMs: number;
  readonly heartbeatMs: number;
  private readonly fleetTtlMs: number;
  private readonly bull: BullWorkers;
  private readonly table: LeaseTable;
  private readonly settlement: LeaseSettlement;
  private readonly scheduler: LeaseScheduler;
  private readonly pool: WorkerPool;
  private readonly identities: WorkerIdentities;
  /** Ranked models' pipelines: gang leases, activation frames, their ends (docs/ranks.md). */
  private readonly pipelines: Pipelines;
  /** Runs' `ttl_s` and `timeout_s` (docs/jobs.md, "Deadlines"). */
  private readonly deadlines: RunDeadlines;
  private readonly channels: ReturnType<typeof dispatchChannels>;
  /** Concurrency limits: read by the job service for `waiting_reason`. */
  readonly gate?: ConcurrencyGate;
  private timers: NodeJS.Timeout[] = [];

  /** The opaque id of a worker in attempt histories (worker-alias.ts). */
  private readonly alias: (workerId: string) => string;

  constructor(private readonly opts: DispatcherOptions) {
    this.alias = workerAliases(opts.workerAliasKey);
    this.leaseTtlMs = opts.leaseTtlMs ?? 30_000;
    this.heartbeatMs = opts.heartbeatMs ?? 5_000;
    this.fleetTtlMs = opts.fleetTtlMs ?? 5_000;
    this.bull = new BullWorkers({ connection: opts.bullConnection, reads: opts.redis, prefixOf: opts.queuePrefixOf, lockMs: this.leaseTtlMs, log: opts.log });
    this.channels = dispatchChannels(opts.prefix);
    // Each piece reaches the ones built after it only through closures, called once running.
    this.fleet = new FleetCounters({ redis: opts.redis, prefix: opts.prefix, gatewayId: opts.gatewayId, ttlMs: this.fleetTtlMs, workers: () => this.pool.all(), leasesOf: (w, kind, model) => this.table.leasesOf(w, kind, model), log: opts.log });
    // A lease made or ended changes its worker's busy slots, and its rank seats if it serves ranks.
    const counted = { changed: (only?: ConnectedWorker) => (this.fleet.changed(only), only && this.pipelines.changed(only)) };
    if (opts.limits) {
      const announce = (q: string) => this.scheduler.announce(q);
      this.gate = new ConcurrencyGate({ ...opts.limits, redis: opts.redis, keys: new RedisKeys(opts.prefix), bull: this.bull, runs: opts.runs, announce, log: opts.log });
    }
    this.table = new LeaseTable({ records: opts.leases, runs: opts.runs, bull: this.bull, fleet: counted, gatewayId: opts.gatewayId, leaseTtlMs: this.leaseTtlMs, log: opts.log });
    this.settlement = new LeaseSettlement(
      {
        fill: (w) => this.scheduler.fill(w),
        announce: (q) => this.scheduler.announce(q),
        attached: (id) => this.pool.get(id),
        rankDone: (lease) => this.pipelines.rankDone(lease),
        pipelineEnded: (lease, why, end) => this.pipelines.ended(lease, why, end),
      },
      {
        runs: opts.runs,
        table: this.table,
        log: opts.log,
        maxAttempts: opts.maxAttempts,
        artifacts: opts.artifacts,
        publicUrl: opts.publicUrl,
        events: opts.events,
        metrics: opts.metrics,
        receipts: opts.receipts,
        gate: this.gate,
        replicas: opts.replicas,
        retries: new RetryPolicy({
          fleet: this.fleet,
          log: opts.log,
          announce: (q) => this.scheduler.announce(q),
          announceAt: (q, at) => this.scheduler.announceAt(q, at),
          coolOff: (w, q, ms) => this.scheduler.coolOff(w, q, ms),
          firstDelayMs: opts.retryBackoffMs,
          maxDelayMs: opts.retryBackoffMaxMs,
        }),
      },
    );
    this.deadlines = new RunDeadlines(
      { table: this.table, settlement: this.settlement, pipelineEnded: (lease, why, end) => this.pipelines.ended(lease, why, end) },
      { redis: opts.redis, prefix: opts.prefix, runs: opts.runs, bull: this.bull, log: opts.log },
    );
    this.scheduler = new LeaseScheduler(
      { deadlines: this.deadlines, workers: () => this.pool.all(), attached: (id) => this.pool.get(id), stopping: () => this.pool.isStopping, table: this.table, settlement: this.settlement, woke: (q) => this.pipelines.wake(q), gate: this.gate },
      {
        redis: opts.redis,
        channel: this.channels.queued,
        runs: opts.runs,
        bull: this.bull,
        log: opts.log,
        maxAttempts: opts.maxAttempts,
        alias: this.alias,
        gatewayId: opts.gatewayId,
        leaseTtlMs: this.leaseTtlMs,
        publicUrl: opts.publicUrl,
        metrics: opts.metrics,
      },
    );
    const partitions = () => opts.partitions?.all ?? [1];
    this.pool = new WorkerPool({ scheduler: this.scheduler, table: this.table, settlement: this.settlement }, { fleet: this.fleet, log: opts.log, partitions });
    this.identities = new WorkerIdentities({
      redis: opts.redis,
      channel: this.channels.workers,
      gatewayId: opts.gatewayId,
      fleet: this.fleet,
      withIdentity: (identity) => this.pool.withIdentity(identity),
      detach: (w, code, reason) => this.pool.detach(w, code, reason, 'disconnect'),
      log: opts.log,
    });
    this.pipelines = new Pipelines(
      {
        redis: opts.redis,
        subscriber: opts.subscriber,
        prefix: opts.prefix,
        gatewayId: opts.gatewayId,
        runs: opts.runs,
        bull: this.bull,
        records: opts.leases,
        table: this.table,
        scheduler: this.scheduler,
        deadlines: this.deadlines,
        catalogue: opts.catalogue,
        workers: () => this.pool.all(),
        attached: (id) => this.pool.get(id),
        publicUrl: opts.publicUrl,
        maxAttempts: opts.maxAttempts,
        alias: this.alias,
        heartbeatMs: this.heartbeatMs,
        bufferBytes: opts.rankBufferBytes,
        gate: this.gate,
        partitions,
        metrics: opts.metrics,
        log: opts.log,
      },
      {
        drop: (lease) => this.settlement.drop(lease),
        lose: (lease, why) => this.settlement.loseLease(lease.id, why, 'disconnect', false),
        heartbeat: (worker) => this.settlement.heartbeat(worker),
      },
    );
  }

  async start(): Promise<void> {
    await this.opts.partitions?.refresh();
    await this.pipelines.start();
    this.deadlines.start();
    const { subscriber } = this.opts;
    await pubsub.subscribe(subscriber, [this.channels.queued, this.channels.cancel, this.channels.workers]);
    pubsub.onMessage(subscriber, (channel, message) => {
      if (channel === this.channels.queued) {
        const [queue, count, from] = message.split(' ');
        // Its own announcements woke this instance's workers when they were made.
        if (from !== this.opts.gatewayId) this.scheduler.wake(queue, Number(count) || 1);
      }
      else if (channel === this.channels.cancel) {
        this.settlement.cancelLocal(message);
        this.pipelines.cancelLocal(message);
      }
      else if (channel === this.channels.workers) this.identities.heard(message);
    });
    // After a subscriber reconnect, announcements may have been missed: look at every queue.
    // A gateway queueing under a partition count new to this one: its workers take those partitions
    // too. A read that fails (its slot failing over) must not hold back the sweep of the queues.
    const repartition = () => this.opts.partitions?.refresh().then((changed) => changed && this.pool.reroute(), (err: unknown) => this.opts.log.warn({ err }, 'could not read the partition counts; the next sweep does'));
    const sweepQueues = () => void Promise.resolve(repartition()).then(() => this.scheduler.sweep()).catch((err: unknown) => this.opts.log.warn({ err }, 'could not sweep the queues; the next sweep does'));
    pubsub.onResubscribed(subscriber, sweepQueues);
    const sweep = setInterval(() => (sweepQueues(), this.pipelines.wakeAll(), this.gate?.sweep()), Math.max(1000, this.leaseTtlMs / 3));
    // Several refreshes per TTL: a dead instance's workers leave the counts within one TTL of its last one.
    const refresh = setInterval(() => void this.pool.refresh().catch((err: unknown) => this.opts.log.warn({ err }, 'could not refresh the fleet counts')), Math.max(100, Math.floor(this.fleetTtlMs / 4)));
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
    for (const t of this.timers) clearInterval(t);
    this.deadlines.stop();
    await this.pool.stop(drainMs, handoverMs);
    // The subscriber is shared (run events, trust changes) and HTTP may still be draining: only our channels go.
    await pubsub.unsubscribe(this.opts.subscriber, [this.channels.queued, this.channels.cancel, this.channels.workers]).catch(() => {});
    await this.pipelines.stop();
    await this.fleet.stop();
    await this.bull.close();
  }

  // ---- workers coming and going -------------------------------------------------------------

  /** A registered worker joins (its models already recorded by `advertise`): it is counted in the fleet and offered work. */
  async attach(worker: ConnectedWorker): Promise<void> {
    await this.pool.attach(worker);
    this.pipelines.changed(worker);
  }

  /**
   * Protocol 5: retires the older connections of the worker's identity, here and on every
   * instance, before it is told `registered` and counted (`WorkerIdentities`).
   */
  claimIdentity(worker: ConnectedWorker): Promise<void> {
    return this.identities.claim(worker);
  }

  /** Protocol 5: the worker's backend went down (no lease is offered it) or answers again (it is filled). */
  setBackend(worker: ConnectedWorker, available: boolean, message?: string): void {
    this.pool.setBackend(worker, available, message);
    this.pipelines.changed(worker);
  }

  /**
   * Protocol 3: a worker's new model list (checked by the caller), recorded in the catalogue,
   * then routing by it; refused, as a whole, when a rank count is not the catalogue's.
   */
  async setModels(worker: ConnectedWorker, models: WorkerModels): Promise<RankConflict | null> {
    const conflict = await this.advertise(models);
    if (!conflict) {
      this.pool.setModels(worker, models);
      this.pipelines.changed(worker);
    }
    return conflict;
  }

  /**
   * Records a worker's models in the catalogue before it is told `registered` (so a worker is
   * never counted with a model the catalogue does not know), in one atomic step that refuses
   * them all when a model's rank count is not the catalogue's (docs/ranks.md).
   */
  async advertise(models: WorkerModels): Promise<RankConflict | null> {
    const list = Object.entries(models).flatMap(([kind, ms]) =>
      ms.map((m) => ({ kind, id: m.id, description: m.description ?? null, input_schema: m.input_schema ?? null, ranks: m.rank?.count ?? null })),
    );
    if (list.length === 0 || !this.opts.catalogue) return null;
    return this.opts.catalogue.advertise(list, new Date().toISOString());
  }

  /** Offers work to an attached worker now (a private worker that presented fresh evidence). */
  offer(worker: ConnectedWorker): void {
    this.pool.offer(worker);
    this.pipelines.changed(worker);
  }

  /** The workers connected to this process, as registered (`busy` kept current). */
  localWorkers(): WorkerInfo[] {
    return this.pool.localWorkers();
  }

  /** This process's registered workers of one token owner (a trust change closes some: TrustEnforcer). */
  workersOf(owner: WorkerInfo['owner']): ConnectedWorker[] {
    return this.pool.workersOf(owner);
  }

  /**
   * Takes over the leases a worker brought from a stopping instance (its register's `resume`),
   * before it is attached, so they count against its slots.
   */
  async adopt(worker: ConnectedWorker, claims: ResumeClaim[]): Promise<{ resumed: string[]; lost: string[] }> {
    const moved = await this.table.adopt(worker, claims);
    // The attempt's timeout goes on here, from the record's `timeout_at`.
    for (const id of moved.resumed) {
      const lease = this.table.get(id);
      if (lease?.timeoutAt !== undefined) this.deadlines.arm(lease, lease.timeoutAt);
    }
    return moved;
  }

  /** A worker leaves (closed socket, missed heartbeats, shutdown): its leases are lost, or handed over if it was told to move. */
  async detach(worker: ConnectedWorker, code = 1000, reason = 'bye', loss: LeaseLossReason = 'disconnect'): Promise<void> {
    await this.pool.detach(worker, code, reason, loss);
    this.pipelines.changed(worker);
  }

  /** A binary frame (a rank's activations): forwarded to the next rank, or the error frame to answer it with. */
  pipelineFrame(worker: ConnectedWorker, data: Buffer): ErrorFrame | null {
    return this.pipelines.frame(worker, data);
  }

  /** Heartbeat: extends the worker's leases. */
  heartbeat(worker: ConnectedWorker): Promise<void> {
    return this.settlement.heartbeat(worker);
  }

  // ---- jobs and leases ------------------------------------------------------------------------

  /** Announces a queued job to every instance's dispatcher (coalesced per queue and tick). */
  announce(queue: string): Promise<void> {
    return this.scheduler.announce(queue);
  }

  /** Handles a lease frame; returns the error frame to send, or null (acknowledged). */
  report(worker: ConnectedWorker, frame: Extract<WorkerFrame, { lease_id: string }>): Promise<{ code: string; message: string } | null> {
    return this.settlement.report(worker, frame);
  }

  /** Tells whichever instance holds the run's lease to cancel it. */
  async requestCancel(runId: string): Promise<void> {
    await pubsub.publish(this.opts.redis, this.channels.cancel, runId);
  }
}
