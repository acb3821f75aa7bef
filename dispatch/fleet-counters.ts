import { RedisKeys } from '../models/redis/keys.js';
import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import { TIERS, type Tier } from '../models/kinds.js';
import type { ConnectedWorker } from './connected-worker.js';
import { effectiveTier } from './worker-info.js';

export type ByTier = Record<Tier, number>;
const zeroByTier = (): ByTier => ({ open: 0, trusted: 0, private: 0 });

/** The workers serving one model of a kind (docs/models.md). */
export interface ModelCounts {
  workers: number;
  by_tier: ByTier;
  slots: number;
  /** Slots that could take a job of this model now: free slots, within the model's `max_concurrency`. */
  free: number;
}

/** Workers and slots under one kind (a worker counts under every kind it serves). */
export interface KindCounts {
  workers: number;
  by_tier: ByTier;
  slots: number;
  busy: number;
  /** The models its workers advertise (protocol 3), by id. */
  models: Record<string, ModelCounts>;
  /** Workers that advertise no model for it: they serve its default queue only. */
  without_models: number;
}

/** What the fleet holds right now, summed over every live gateway instance. */
export interface FleetSnapshot {
  workers: number;
  by_tier: ByTier;
  slots: number;
  busy: number;
  kinds: Record<string, KindCounts>;
}

const TIER_RANK: Record<Tier, number> = { open: 0, trusted: 1, private: 2 };
/** Workers of `byTier` that may take a job of `tier`: those of that tier or a stronger one. */
export const workersServing = (byTier: ByTier, tier: Tier): number => TIERS.reduce((n, t) => n + (TIER_RANK[t] >= TIER_RANK[tier] ? byTier[t] : 0), 0);

const emptySnapshot = (): FleetSnapshot => ({ workers: 0, by_tier: zeroByTier(), slots: 0, busy: 0, kinds: {} });
const emptyKind = (): KindCounts => ({ workers: 0, by_tier: zeroByTier(), slots: 0, busy: 0, models: {}, without_models: 0 });
const emptyModel = (): ModelCounts => ({ workers: 0, by_tier: zeroByTier(), slots: 0, free: 0 });

const addTiers = (to: ByTier, from: ByTier, sign: number): void => {
  for (const t of TIERS) to[t] += sign * from[t];
};

/** Adds (`sign` 1) or takes away (-1) one worker's share; kinds and models left with no worker go. */
function addSnapshot(to: FleetSnapshot, part: FleetSnapshot, sign: 1 | -1): void {
  to.workers += sign * part.workers;
  to.slots += sign * part.slots;
  to.busy += sign * part.busy;
  addTiers(to.by_tier, part.by_tier, sign);
  for (const [kind, k] of Object.entries(part.kinds)) {
    const sum = (to.kinds[kind] ??= emptyKind());
    sum.workers += sign * k.workers;
    sum.slots += sign * k.slots;
    sum.busy += sign * k.busy;
    sum.without_models += sign * k.without_models;
    addTiers(sum.by_tier, k.by_tier, sign);
    for (const [id, m] of Object.entries(k.models)) {
      const c = (sum.models[id] ??= emptyModel());
      c.workers += sign * m.workers;
      c.slots += sign * m.slots;
      c.free += sign * m.free;
      addTiers(c.by_tier, m.by_tier, sign);
      if (c.workers === 0) delete sum.models[id];
    }
    if (sum.workers === 0) delete to.kinds[kind];
  }
}

export interface FleetCountersOptions {
  /** The connection the API reads with too: a write issued before a read on it is seen by that read. */
  redis: Redis;
  prefix: string;
  gatewayId: string;
  /** A dead instance's counts vanish this long after its last write. */
  ttlMs: number;
  /** The workers attached to this instance now. */
  workers: () => Iterable<ConnectedWorker>;
  /** The leases a worker holds of one model of a kind (for `max_concurrency`). */
  leasesOf?: (worker: ConnectedWorker, kind: string, model: string) => number;
  log: Logger;
}

/**
 * The fleet's counts (workers, slots, busy slots, by kind and tier) as one small record per
 * gateway instance. An instance rewrites its record after every change it makes (attach,
 * detach, lease, release, tier change; at most once per event-loop turn) and at its registry
 * refresh, with an expiry, so a dead
 * instance's workers drop out by themselves; readers sum the live instances' records: a read
 * costs two commands whatever the number of workers.
 */
export class FleetCounters {
  private lapseTimer?: NodeJS.Timeout;
  private stopped = false;
  /** Each counted worker's share of `total`, as last written. */
  private readonly parts = new Map<ConnectedWorker, FleetSnapshot>();
  private total = emptySnapshot();
  /** Workers whose share changed since the last write; `recountAll`: count every worker again. */
  private readonly dirty = new Set<ConnectedWorker>();
  private recountAll = true;
  private flushing?: NodeJS.Immediate;
  /** Bumped by every change on this instance: a read may join one in flight only if none came since it began. */
  private generation = 0;
  private reading?: { generation: number; snapshot: Promise<FleetSnapshot> };

  private readonly keys: RedisKeys;

  constructor(private readonly opts: FleetCountersOptions) {
    this.keys = new RedisKeys(opts.prefix);
  }

  private get index(): string {
    return this.keys.fleetInstances();
  }

  private record(gatewayId: string): string {
    return this.keys.fleetInstance(gatewayId);
  }

  /** This instance's counts, from its attached workers as they are now (each one's share kept for later changes). */
  private local(now = Date.now()): FleetSnapshot {
    const s = emptySnapshot();
    this.parts.clear();
    let nextLapse = Infinity;
    for (const w of this.opts.workers()) {
      if (w.info.tier === 'private' && effectiveTier(w.info, now) === 'private') nextLapse = Math.min(nextLapse, Date.parse(w.info.attested_until!));
      const part = this.count(w, now);
      this.parts.set(w, part);
      addSnapshot(s, part, 1);
    }
    this.scheduleLapse(nextLapse - now);
    return s;
  }

  /** One worker's share of the counts. */
  private count(w: ConnectedWorker, now: number): FleetSnapshot {
    const s = emptySnapshot();
    const tier = effectiveTier(w.info, now);
    const busy = Math.min(w.leases.size, w.info.slots);
    s.workers = 1;
    s.by_tier[tier] = 1;
    s.slots = w.info.slots;
    s.busy = busy;
    for (const kind of w.info.kinds) {
      const k = (s.kinds[kind] ??= emptyKind());
      k.workers = 1;
      k.by_tier[tier] = 1;
      k.slots = w.info.slots;
      k.busy = busy;
      if (!w.info.models[kind]?.length) k.without_models = 1;
      for (const m of w.info.models[kind] ?? []) {
        const c = (k.models[m.id] ??= emptyModel());
        const held = m.max_concurrency === undefined ? 0 : (this.opts.leasesOf?.(w, kind, m.id) ?? 0);
        c.workers++;
        c.by_tier[tier]++;
        c.slots += Math.min(w.info.slots, m.max_concurrency ?? Infinity);
        c.free += Math.max(0, Math.min(w.info.slots - busy, (m.max_concurrency ?? Infinity) - held));
      }
    }
    return s;
  }

  /**
   * Writes this instance's counts. A lease or release names its worker: only that worker's
   * share is counted again (a recount of every worker and model on each lease grew with the
   * fleet: 9–11% of the dispatcher's time with 100 models). Any other change recounts all.
   * The write waits for the end of this event-loop turn, so a burst of changes costs one;
   * `read()` on this instance issues a pending write first, so a read made after a change
   * sees it, as when every change was written at once.
   */
  changed(worker?: ConnectedWorker): void {
    if (this.stopped) return;
    this.generation++;
    if (worker && this.parts.has(worker) && !this.recountAll) this.dirty.add(worker);
    else this.recountAll = true;
    if (this.flushing) return;
    this.flushing = setImmediate(() => this.flush());
  }

  /** Issues the pending write, if any, on the shared connection (ahead of any command issued after it). */
  private flush(): void {
    if (!this.flushing) return;
    clearImmediate(this.flushing);
    this.flushing = undefined;
    if (this.stopped) return;
    const now = Date.now();
    if (this.recountAll) this.total = this.local(now);
    else {
      for (const w of this.dirty) {
        const part = this.count(w, now);
        addSnapshot(this.total, this.parts.get(w)!, -1);
        addSnapshot(this.total, part, 1);
        this.parts.set(w, part);
      }
    }
    this.recountAll = false;
    this.dirty.clear();
    // Two plain commands, not a MULTI: they join the connection's auto-pipeline (a MULTI is a
    // socket write of its own, per change). Not atomic, and need not be: a reader skips an
    // index entry without a record, and a record without an entry is not read.
    const failed = (err: unknown) => this.opts.log.warn({ err }, 'could not write the fleet counts; the registry refresh writes them again');
    this.opts.redis.set(this.record(this.opts.gatewayId), JSON.stringify(this.total), 'PX', this.opts.ttlMs).catch(failed);
    this.opts.redis.zadd(this.index, now + this.opts.ttlMs, this.opts.gatewayId).catch(failed);
  }

  /** A private worker's evidence lapsing changes its tier without any event: count it again then. */
  private scheduleLapse(inMs: number): void {
    clearTimeout(this.lapseTimer);
    this.lapseTimer = undefined;
    if (!Number.isFinite(inMs) || this.stopped) return;
    this.lapseTimer = setTimeout(() => this.changed(), Math.max(0, inMs) + 1).unref();
  }

  /** Stops writing and removes this instance's counts (a clean shutdown). */
  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.lapseTimer);
    if (this.flushing) clearImmediate(this.flushing);
    this.flushing = undefined;
    await this.opts.redis.multi().del(this.record(this.opts.gatewayId)).zrem(this.index, this.opts.gatewayId).exec().catch(() => {});
  }

  /**
   * This instance's own counts, current (a pending write is issued first): what its connected
   * workers serve, known without a round trip. The snapshot is shared: do not modify it.
   */
  localSnapshot(): FleetSnapshot {
    this.flush();
    return this.total;
  }

  /**
   * The fleet: every live instance's counts, summed. Reads made while one is in flight, with no
   * change on this instance since it began, share it (its round trips and its parsing): a burst
   * of chat completions checks the fleet once per round trip, not once per request. The
   * snapshot may be shared: callers must not modify it.
   */
  async read(): Promise<FleetSnapshot> {
    this.flush();
    if (this.reading?.generation === this.generation) return this.reading.snapshot;
    const reading = { generation: this.generation, snapshot: this.readNow() };
    this.reading = reading;
    try {
      return await reading.snapshot;
    } finally {
      if (this.reading === reading) this.reading = undefined;
    }
  }

  private async readNow(): Promise<FleetSnapshot> {
    const now = Date.now();
    const ids = await this.opts.redis.zrangebyscore(this.index, now, '+inf');
    void this.opts.redis.zremrangebyscore(this.index, '-inf', now - 1).catch(() => {});
    const total = emptySnapshot();
    if (ids.length === 0) return total;
    for (const raw of await this.opts.redis.mget(ids.map((id) => this.record(id)))) {
      if (raw === null) continue;
      const s = JSON.parse(raw) as FleetSnapshot;
      total.workers += s.workers;
      total.slots += s.slots;
      total.busy += s.busy;
      for (const t of TIERS) total.by_tier[t] += s.by_tier[t];
      for (const [kind, k] of Object.entries(s.kinds)) {
        const sum = (total.kinds[kind] ??= emptyKind());
        sum.workers += k.workers;
        sum.slots += k.slots;
        sum.busy += k.busy;
        sum.without_models += k.without_models ?? 0;
        for (const t of TIERS) sum.by_tier[t] += k.by_tier[t];
        for (const [id, m] of Object.entries(k.models)) {
          const c = (sum.models[id] ??= emptyModel());
          c.workers += m.workers;
          c.slots += m.slots;
          c.free += m.free;
          for (const t of TIERS) c.by_tier[t] += m.by_tier[t];
        }
      }
    }
    return total;
  }
}
