import type { Logger } from 'pino';
import { TIERS } from '../models/kinds.js';
import type { Tier } from '../models/kinds.js';
import { partitionNames, queueName, unpartitioned } from '../queues/queue-names.js';
import type { WorkerModels } from '../sdk/protocol/index.js';
import { TIER_RANK, type ConnectedWorker } from './connected-worker.js';
import type { LeaseLossReason } from './dispatch-observer.js';
import type { FleetCounters } from './fleet-counters.js';
import type { LeaseScheduler } from './lease-scheduler.js';
import type { LeaseSettlement } from './lease-settlement.js';
import type { LeaseTable } from './lease-table.js';
import { HANDOVER_PROTOCOL } from '../sdk/protocol/index.js';
import type { WorkerInfo } from './worker-info.js';

/** What the pool needs from the rest of the dispatcher: the pieces built before it, passed in by the facade. */
export interface PoolContext {
  /** Offers work to a worker that joined or may take private work again. */
  scheduler: Pick<LeaseScheduler, 'fill' | 'forget'>;
  /** The leases a worker holds: looked up when it joins, handed over when it moves. */
  table: Pick<LeaseTable, 'get' | 'handOver'>;
  /** Loses the leases of a worker that leaves. */
  settlement: Pick<LeaseSettlement, 'loseLease'>;
}

export interface WorkerPoolOptions {
  fleet: FleetCounters;
  log: Logger;
  /** Every partition count jobs were queued under (QUEUE_PARTITIONS): a worker takes jobs from each partition of its queues. @defaultValue [1] */
  partitions?: () => readonly number[];
}

/**
 * The workers attached to this process, by id: what they serve, how they join and leave, and
 * letting them go when the process stops. Every change is written to the fleet counts at once.
 */
export class WorkerPool {
  private readonly workers = new Map<string, ConnectedWorker>();
  /** Protocol 5: the attached connections of each worker identity (one, but for a moment two). */
  private readonly byIdentity = new Map<string, Set<ConnectedWorker>>();
  private stopping = false;

  constructor(
    private readonly ctx: PoolContext,
    private readonly opts: WorkerPoolOptions,
  ) {}

  /** Set once the process stops: a worker attaching now is let go at once. */
  get isStopping(): boolean {
    return this.stopping;
  }

  all(): IterableIterator<ConnectedWorker> {
    return this.workers.values();
  }

  get(workerId: string): ConnectedWorker | undefined {
    return this.workers.get(workerId);
  }

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

  async attach(worker: ConnectedWorker): Promise<void> {
    const { info } = worker;
    for (const id of worker.leases) {
      const lease = this.ctx.table.get(id);
      if (lease?.cancelOnAttach) worker.send({ type: 'cancel', lease_id: id, run_id: lease.runId });
    }
    if (this.stopping) this.letGo(worker);
    this.opts.log.info({ workerId: info.worker_id, kinds: info.kinds.length, tier: info.tier, slots: info.slots, resumed: worker.leases.size }, 'worker attached');
    const tiers = worker.tiers ?? TIERS.filter((t) => TIER_RANK[t] <= TIER_RANK[info.tier]).sort((a, b) => TIER_RANK[b] - TIER_RANK[a]);
    worker.tiers = tiers;
    this.route(worker);
    this.workers.set(info.worker_id, worker);
    if (worker.identity) {
      let same = this.byIdentity.get(worker.identity);
      if (!same) this.byIdentity.set(worker.identity, (same = new Set()));
      same.add(worker);
    }
    if (worker.attestation) {
      info.attested_until = worker.attestation.current?.expires_at ?? null;
      info.fallback_tier = tiers.find((t) => t !== 'private') ?? 'open';
    }
    this.opts.fleet.joined(worker);
    void this.ctx.scheduler.fill(worker);
  }

  /** Protocol 3: the worker now serves these models (already checked and catalogued): it is routed by them from its next fetch. */
  setModels(worker: ConnectedWorker, models: WorkerModels): void {
    worker.info.models = models;
    if (this.workers.get(worker.info.worker_id) !== worker) return;
    this.route(worker);
    this.opts.fleet.changed();
    void this.ctx.scheduler.fill(worker);
  }

  /** Protocol 5: while its backend is down the worker is counted but offered no lease; once it answers, it is filled. */
  setBackend(worker: ConnectedWorker, available: boolean, message = ''): void {
    if (available === !worker.info.backend_down) return;
    worker.info.backend_down = available ? undefined : { message, since: new Date().toISOString() };
    this.opts.log.info({ workerId: worker.info.worker_id, available, message: message || undefined }, available ? 'worker backend available again' : 'worker backend unavailable');
    if (this.workers.get(worker.info.worker_id) !== worker) return;
    this.opts.fleet.changed(worker);
    if (available) void this.ctx.scheduler.fill(worker);
  }

  offer(worker: ConnectedWorker): void {
    if (this.workers.get(worker.info.worker_id) !== worker) return;
    // The fleet views (capabilities, capacity) count it as private again at once.
    worker.info.attested_until = worker.attestation?.current?.expires_at ?? null;
    this.opts.fleet.changed();
    void this.ctx.scheduler.fill(worker);
  }

  localWorkers(): WorkerInfo[] {
    return [...this.workers.values()].map((w) => w.info);
  }

  withIdentity(identity: string): Iterable<ConnectedWorker> {
    return this.byIdentity.get(identity) ?? [];
  }

  workersOf(owner: WorkerInfo['owner']): ConnectedWorker[] {
    return [...this.workers.values()].filter((w) => w.info.owner.type === owner.type && w.info.owner.id === owner.id);
  }

  async detach(worker: ConnectedWorker, code: number, reason: string, loss: LeaseLossReason): Promise<void> {
    if (!this.workers.delete(worker.info.worker_id)) return;
    const same = worker.identity ? this.byIdentity.get(worker.identity) : undefined;
    if (same?.delete(worker) && same.size === 0) this.byIdentity.delete(worker.identity!);
    this.ctx.scheduler.forget(worker);
    // Gone from the fleet's counts now, before its leases are settled.
    this.opts.fleet.left(worker);
    worker.draining = true;
    worker.attestation?.close();
    try {
      worker.close(code, reason);
    } catch {
      // already closed
    }
    // Rank leases cannot move (docs/worker-protocol.md, "Ranks"): they are lost, and their pipeline runs again.
    const moving = worker.handover ? [...worker.leases].filter((id) => !this.ctx.table.get(id)?.rank) : [];
    for (const id of moving) this.ctx.table.handOver(id);
    await Promise.all([...worker.leases].map((id) => this.ctx.settlement.loseLease(id, 'the worker disconnected', loss)));
    this.opts.log.info({ workerId: worker.info.worker_id, code, handover: !!worker.handover }, 'worker detached');
  }

  /** Keeps this instance's fleet counts alive, counting again any worker whose evidence was renewed meanwhile. */
  async refresh(): Promise<void> {
    let renewed = false;
    for (const w of this.workers.values()) {
      if (!w.attestation) continue;
      const until = w.attestation.current?.expires_at ?? null;
      if (w.info.attested_until !== until) renewed = true;
      w.info.attested_until = until;
    }
    if (renewed) this.opts.fleet.changed();
    await this.opts.fleet.refresh();
  }

  /** Routes a worker by its kinds, tiers and models over the deployment's partitions. */
  private route(worker: ConnectedWorker): void {
    route(worker, this.opts.partitions?.() ?? [1]);
  }

  /** The deployment's partition counts changed: every worker is routed again, and looks for work in its new queues. */
  reroute(): void {
    for (const w of this.workers.values()) {
      this.route(w);
      void this.ctx.scheduler.fill(w);
    }
  }

  /** Lets every worker go (`Dispatcher.stop` says how), then detaches those still here. */
  async stop(drainMs: number, handoverMs: number): Promise<void> {
    this.stopping = true;
    for (const w of this.workers.values()) this.letGo(w);
    const started = Date.now();
    // A lease whose final report is being handled has left `leases` (its slot is freed as soon as
    // the run is recorded) but its worker is still owed the answer: the socket waits for it too.
    const waiting = (w: ConnectedWorker) => (w.handover ? Date.now() - started < handoverMs : (w.leases.size > 0 || (w.settling ?? 0) > 0) && Date.now() - started < drainMs);
    while ([...this.workers.values()].some(waiting)) await new Promise((r) => setTimeout(r, 50));
    await Promise.all([...this.workers.values()].map((w) => this.detach(w, 1012, 'gateway restarting; reconnect', 'shutdown')));
  }
}

/**
 * The queues a worker takes leases from, per tier (docs/models.md, "Routing"): for each of its
 * kinds, the kind's default queue (jobs naming no model) and then the queue of each model it
 * serves whole, each as its partitions under every count in `partitions` (QUEUE_PARTITIONS).
 * The scheduler walks each tier's list round-robin, so kinds, models and partitions take turns.
 * A model it serves one rank of is not among them: a rank worker never runs a job whole, only
 * its rank of a pipeline (docs/ranks.md). Nor is the kind's queue when every model it lists for
 * the kind is a rank: it has nothing whole to run a job naming no model with.
 */
export function tierQueues(kinds: readonly string[], models: WorkerModels, tier: Tier, partitions: readonly number[] = [1]): string[] {
  return kinds.flatMap((kind) => {
    const listed = models[kind] ?? [];
    const whole = listed.filter((m) => !m.rank);
    const onlyRanks = listed.length > 0 && whole.length === 0;
    const queues = [...(onlyRanks ? [] : [queueName(kind, tier)]), ...whole.map((m) => queueName(kind, tier, m.id))];
    return queues.flatMap((q) => partitionNames(q, partitions));
  });
}

/** Sets the worker's queues and per-queue limits from its kinds, tiers and models, and the deployment's partition counts. */
function route(worker: ConnectedWorker, partitions: readonly number[]): void {
  const { kinds, models } = worker.info;
  const tiers = worker.tiers ?? [worker.info.tier];
  worker.queues = tiers.map((tier) => tierQueues(kinds, models, tier, partitions));
  worker.served = new Set(worker.queues.flat());
  worker.partitionsOf = worker.queues.map((list) => {
    const groups = new Map<string, number[]>();
    list.forEach((q, k) => {
      const base = unpartitioned(q);
      groups.set(base, [...(groups.get(base) ?? []), k]);
    });
    return list.map((q) => groups.get(unpartitioned(q))!);
  });
  const limits = new Map<string, number>();
  for (const [kind, list] of Object.entries(models)) {
    for (const m of list) if (m.max_concurrency !== undefined) for (const tier of tiers) for (const q of partitionNames(queueName(kind, tier, m.id), partitions)) limits.set(q, m.max_concurrency);
  }
  worker.modelLimits = limits;
  // The cursor indexes the lists: past their end after a shorter list, it starts over.
  worker.cursor = 0;
}
