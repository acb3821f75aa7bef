import { TIERS, type Tier } from '../models/kinds.js';
import type { ConnectedWorker } from './connected-worker.js';
import { effectiveTier } from './worker-info.js';

export type ByTier = Record<Tier, number>;
const zeroByTier = (): ByTier => ({ open: 0, trusted: 0, private: 0 });

/**
 * The workers serving one rank of a ranked model (docs/ranks.md) that could be offered a lease
 * now (connected, their backend answering): by their tier, and by each tier of work they take
 * (a trusted worker counts under `trusted` and `open`), which is what placement reads.
 */
export interface RankCounts {
  by_tier: ByTier;
  takes: ByTier;
}

/** The workers serving one model of a kind (docs/models.md). */
export interface ModelCounts {
  workers: number;
  by_tier: ByTier;
  slots: number;
  /** Slots that could take a job of this model now: free slots, within the model's `max_concurrency`, of workers whose backend answers. */
  free: number;
  /** Of `workers`, those whose backend is down (protocol 5 `backend`): connected, offered no lease. */
  unavailable: number;
  unavailable_by_tier: ByTier;
  /**
   * Protocol 6: its rank workers, by `<index>/<count>` as each advertised it. Keyed by the
   * count too, so that workers of a count the catalogue no longer has are told apart. Absent: none.
   */
  ranks?: Record<string, RankCounts>;
}

/** Workers and slots under one kind (a worker counts under every kind it serves). */
export interface KindCounts {
  workers: number;
  by_tier: ByTier;
  slots: number;
  busy: number;
  /** Of `workers`, those whose backend is down: connected, but offered no lease. */
  unavailable: number;
  unavailable_by_tier: ByTier;
  /** The free slots of those workers: not busy, and not free either. */
  unavailable_slots: number;
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
  /** Workers whose backend is down, and their slots that are neither busy nor free. */
  unavailable: number;
  unavailable_slots: number;
  kinds: Record<string, KindCounts>;
}

const TIER_RANK: Record<Tier, number> = { open: 0, trusted: 1, private: 2 };
/** Workers of `byTier` that may take a job of `tier`: those of that tier or a stronger one. */
export const workersServing = (byTier: ByTier, tier: Tier): number => TIERS.reduce((n, t) => n + (TIER_RANK[t] >= TIER_RANK[tier] ? byTier[t] : 0), 0);

/** Workers of a kind or model that could be offered a job of `tier` now: connected and with a backend that answers. */
export const availableServing = (c: Pick<KindCounts, 'by_tier' | 'unavailable_by_tier'>, tier: Tier): number =>
  workersServing(c.by_tier, tier) - workersServing(c.unavailable_by_tier ?? zeroByTier(), tier);

export const emptySnapshot = (): FleetSnapshot => ({ workers: 0, by_tier: zeroByTier(), slots: 0, busy: 0, unavailable: 0, unavailable_slots: 0, kinds: {} });
const emptyKind = (): KindCounts => ({ workers: 0, by_tier: zeroByTier(), slots: 0, busy: 0, unavailable: 0, unavailable_by_tier: zeroByTier(), unavailable_slots: 0, models: {}, without_models: 0 });
const emptyModel = (): ModelCounts => ({ workers: 0, by_tier: zeroByTier(), slots: 0, free: 0, unavailable: 0, unavailable_by_tier: zeroByTier() });

const addTiers = (to: ByTier, from: ByTier | undefined, sign: number): void => {
  if (from) for (const t of TIERS) to[t] += sign * (from[t] ?? 0);
};

/** The key of rank `index` of `count` in `ModelCounts.ranks`. */
export const rankKey = (index: number, count: number): string => `${index}/${count}`;

/** Adds or takes away a part's rank counts; a rank left with no worker goes, and `ranks` when none is left. */
function addRanks(to: ModelCounts, from: ModelCounts['ranks'], sign: number): void {
  for (const [key, r] of Object.entries(from ?? {})) {
    const ranks = (to.ranks ??= {});
    const sum = (ranks[key] ??= { by_tier: zeroByTier(), takes: zeroByTier() });
    addTiers(sum.by_tier, r.by_tier, sign);
    addTiers(sum.takes, r.takes, sign);
    if (TIERS.every((t) => sum.by_tier[t] <= 0 && sum.takes[t] <= 0)) delete ranks[key];
    if (Object.keys(ranks).length === 0) delete to.ranks;
  }
}

/**
 * A ranked model's counts per rank for the catalogue's `count`, rank 0 first: a rank nobody
 * serves is zeros, and workers that advertised another count are left out.
 */
export function rankCounts(model: ModelCounts | undefined, count: number): RankCounts[] {
  return Array.from({ length: count }, (_, i) => {
    const r = model?.ranks?.[rankKey(i, count)];
    return { by_tier: { ...zeroByTier(), ...r?.by_tier }, takes: { ...zeroByTier(), ...r?.takes } };
  });
}

/**
 * Adds (`sign` 1) or takes away (-1) a part of the fleet (one worker's share, or an instance's
 * counts); kinds and models left with no worker go. Fields missing from `part` count as 0.
 */
export function addSnapshot(to: FleetSnapshot, part: FleetSnapshot, sign: 1 | -1): void {
  to.workers += sign * part.workers;
  to.slots += sign * part.slots;
  to.busy += sign * part.busy;
  to.unavailable += sign * (part.unavailable ?? 0);
  to.unavailable_slots += sign * (part.unavailable_slots ?? 0);
  addTiers(to.by_tier, part.by_tier, sign);
  for (const [kind, k] of Object.entries(part.kinds)) {
    const sum = (to.kinds[kind] ??= emptyKind());
    sum.workers += sign * k.workers;
    sum.slots += sign * k.slots;
    sum.busy += sign * k.busy;
    sum.unavailable += sign * (k.unavailable ?? 0);
    sum.unavailable_slots += sign * (k.unavailable_slots ?? 0);
    sum.without_models += sign * (k.without_models ?? 0);
    addTiers(sum.by_tier, k.by_tier, sign);
    addTiers(sum.unavailable_by_tier, k.unavailable_by_tier, sign);
    for (const [id, m] of Object.entries(k.models)) {
      const c = (sum.models[id] ??= emptyModel());
      c.workers += sign * m.workers;
      c.slots += sign * m.slots;
      c.free += sign * m.free;
      c.unavailable += sign * (m.unavailable ?? 0);
      addTiers(c.by_tier, m.by_tier, sign);
      addTiers(c.unavailable_by_tier, m.unavailable_by_tier, sign);
      addRanks(c, m.ranks, sign);
      if (c.workers <= 0) delete sum.models[id];
    }
    if (sum.workers <= 0) delete to.kinds[kind];
  }
}

/**
 * One worker's share of the counts at `now`. `leasesOf` says how many of its leases are of a
 * model (for `max_concurrency`). A worker whose backend is down keeps its connected counts but
 * offers no free slot.
 */
export function workerShare(w: ConnectedWorker, now: number, leasesOf?: (worker: ConnectedWorker, kind: string, model: string) => number): FleetSnapshot {
  const s = emptySnapshot();
  const tier = effectiveTier(w.info, now);
  // The tiers of work it takes now: a private worker takes private work only while attested.
  const takes = (w.tiers ?? TIERS.filter((t) => TIER_RANK[t] <= TIER_RANK[w.info.tier])).filter((t) => t !== 'private' || tier === 'private');
  const busy = Math.min(w.leases.size, w.info.slots);
  const down = w.info.backend_down ? 1 : 0;
  const idle = w.info.slots - busy;
  s.workers = 1;
  s.by_tier[tier] = 1;
  s.slots = w.info.slots;
  s.busy = busy;
  s.unavailable = down;
  s.unavailable_slots = down * idle;
  for (const kind of w.info.kinds) {
    const k = (s.kinds[kind] ??= emptyKind());
    k.workers = 1;
    k.by_tier[tier] = 1;
    k.slots = w.info.slots;
    k.busy = busy;
    k.unavailable = down;
    k.unavailable_by_tier[tier] = down;
    k.unavailable_slots = down * idle;
    if (!w.info.models[kind]?.length) k.without_models = 1;
    for (const m of w.info.models[kind] ?? []) {
      const c = (k.models[m.id] ??= emptyModel());
      const held = m.max_concurrency === undefined ? 0 : (leasesOf?.(w, kind, m.id) ?? 0);
      c.workers++;
      c.by_tier[tier]++;
      c.unavailable += down;
      c.unavailable_by_tier[tier] += down;
      c.slots += Math.min(w.info.slots, m.max_concurrency ?? Infinity);
      c.free += down ? 0 : Math.max(0, Math.min(idle, (m.max_concurrency ?? Infinity) - held));
      if (m.rank && !down) {
        const r = { by_tier: zeroByTier(), takes: zeroByTier() };
        r.by_tier[tier] = 1;
        for (const t of takes) r.takes[t] = 1;
        c.ranks = { [rankKey(m.rank.index, m.rank.count)]: r };
      }
    }
  }
  return s;
}

/** The sum of several parts (instances' counts, read from Redis). */
export function sumSnapshots(parts: Iterable<FleetSnapshot>): FleetSnapshot {
  const total = emptySnapshot();
  for (const p of parts) addSnapshot(total, p, 1);
  return total;
}
