import { priceView, type KindPrice } from '../../../models/pricing.js';
import type { FleetCounters, FleetSnapshot } from '../../../dispatch/fleet-counters.js';
import type { JobQueues } from '../../../queues/job-queues.js';
import { parseQueueName } from '../../../queues/queue-names.js';
import { KINDS, TIERS, type Tier } from '../../../models/kinds.js';
import type { ModelStore } from '../../../models/stores.js';
import type { ModelRecord } from '../../../models/types.js';
import { WHOLE_MODEL, rankedModelView } from './ranked-models.js';

type ByTier = Record<Tier, number>;
const zeroByTier = (): ByTier => ({ open: 0, trusted: 0, private: 0 });

export interface FleetServiceOptions {
  /** The fleet's counts, summed over every live instance (dispatch/fleet-counters.ts). */
  fleet: Pick<FleetCounters, 'read'>;
  queues: JobQueues;
  /** The model catalogue: every model of a kind is shown, served now or not. */
  catalogue: Pick<ModelStore, 'list'>;
  /** Each kind's price (PRICES), shown with it; absent: not shown. */
  prices?: Record<string, KindPrice>;
  /** Queue counts cost a read of every queue and capacity is public: they are cached this long. @defaultValue 1000 */
  queueCacheMs?: number;
}

/**
 * What the fleet can do right now. Workers and slots come from the counts every instance
 * rewrites as its workers attach, detach, take and finish leases (a dead instance's expire), so
 * both views follow the fleet as it changes and never contradict each other; only the queue
 * counts of capacity are cached.
 */
export class FleetService {
  private cachedCounts?: { at: number; value: Promise<Map<string, { queued: number; running: number }>> };

  constructor(private readonly opts: FleetServiceOptions) {}

  async capabilities() {
    const [fleet, catalogue] = await Promise.all([this.opts.fleet.read(), this.opts.catalogue.list()]);
    const byKind = groupByKind(catalogue);
    return {
      kinds: KINDS.map((spec) => {
        const k = fleet.kinds[spec.kind];
        return {
          kind: spec.kind,
          rollout: spec.rollout,
          description: spec.description,
          ...(this.opts.prices?.[spec.kind] !== undefined && { price: priceView(this.opts.prices[spec.kind]) }),
          workers: k?.workers ?? 0,
          workers_by_tier: k ? { ...k.by_tier } : zeroByTier(),
          workers_unavailable: k?.unavailable ?? 0,
          input_schema: spec.inputSchema,
          output_artifacts: spec.output.artifacts,
          output_schema: spec.output.schema,
          models: (byKind.get(spec.kind) ?? []).map((m) => {
            const live = k?.models[m.id];
            return {
              id: m.id,
              description: m.description,
              workers: live?.workers ?? 0,
              workers_by_tier: live ? { ...live.by_tier } : zeroByTier(),
              workers_unavailable: live?.unavailable ?? 0,
              input_schema: m.input_schema,
              ...(rankedModelView(m, live) ?? WHOLE_MODEL),
            };
          }),
        };
      }),
    };
  }

  async capacity() {
    const [fleet, counts, catalogue] = await Promise.all([this.opts.fleet.read(), this.queueCountsCached(), this.opts.catalogue.list()]);
    const byKind = groupByKind(catalogue);
    const queued = (kind: string, model: string | null) => TIERS.reduce((n, tier) => n + (counts.get(countKey(kind, tier, model))?.queued ?? 0), 0);
    return {
      workers: { total: fleet.workers, by_tier: fleet.by_tier, unavailable: fleet.unavailable },
      slots: { total: fleet.slots, busy: fleet.busy, free: fleet.slots - fleet.busy - fleet.unavailable_slots, unavailable: fleet.unavailable_slots },
      jobs: {
        queued: [...counts.values()].reduce((n, c) => n + c.queued, 0),
        running: [...counts.values()].reduce((n, c) => n + c.running, 0),
      },
      by_kind: KINDS.map(({ kind }) => {
        const k = fleet.kinds[kind];
        const queuedForModels = (byKind.get(kind) ?? []).reduce((n, m) => n + queued(kind, m.id), 0);
        return {
          kind,
          workers: k?.workers ?? 0,
          workers_unavailable: k?.unavailable ?? 0,
          slots_free: k ? k.slots - k.busy - k.unavailable_slots : 0,
          queued: queued(kind, null) + queuedForModels,
          models: modelCapacity(kind, byKind.get(kind) ?? [], fleet, queued),
        };
      }),
      updated_at: new Date().toISOString(),
    };
  }

  private queueCountsCached() {
    const now = Date.now();
    if (!this.cachedCounts || now - this.cachedCounts.at > (this.opts.queueCacheMs ?? 1000)) {
      this.cachedCounts = { at: now, value: this.queueCounts() };
      this.cachedCounts.value.catch(() => (this.cachedCounts = undefined));
    }
    return this.cachedCounts.value;
  }

  /** Counts of every queue (the kinds' default queues and every model queue, each the sum of its partitions), by kind, tier and model. */
  private async queueCounts(): Promise<Map<string, { queued: number; running: number }>> {
    const queues = await this.opts.queues.known();
    const counts = new Map<string, { queued: number; running: number }>();
    await Promise.all(
      queues.map(async (queue) => {
        const at = parseQueueName(queue.name)!;
        const c = await queue.getJobCounts('wait', 'prioritized', 'delayed', 'active');
        const key = countKey(at.kind, at.tier, at.model);
        const sum = counts.get(key) ?? { queued: 0, running: 0 };
        sum.queued += (c.wait ?? 0) + (c.prioritized ?? 0) + (c.delayed ?? 0);
        sum.running += c.active ?? 0;
        counts.set(key, sum);
      }),
    );
    return counts;
  }
}

const countKey = (kind: string, tier: Tier, model: string | null) => `${kind}|${tier}|${model ?? ''}`;

function groupByKind(models: ModelRecord[]): Map<string, ModelRecord[]> {
  const out = new Map<string, ModelRecord[]>();
  for (const m of models) out.set(m.kind, [...(out.get(m.kind) ?? []), m]);
  return out;
}

/** Each catalogue model of a kind: its workers, the slots that could take one of its jobs now, and its queued jobs. */
function modelCapacity(kind: string, models: ModelRecord[], fleet: FleetSnapshot, queued: (kind: string, model: string) => number) {
  return models.map((m) => {
    const live = fleet.kinds[kind]?.models[m.id];
    return { id: m.id, workers: live?.workers ?? 0, workers_unavailable: live?.unavailable ?? 0, slots_free: live?.free ?? 0, queued: queued(kind, m.id) };
  });
}
