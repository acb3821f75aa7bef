import type { FleetCounters } from '../../../dispatch/fleet-counters.js';
import type { JobQueues } from '../../../queues/job-queues.js';
import { KINDS, TIERS, type Tier } from '../../../models/kinds.js';

type ByTier = Record<Tier, number>;
const zeroByTier = (): ByTier => ({ open: 0, trusted: 0, private: 0 });

export interface FleetServiceOptions {
  /** The fleet's counts, summed over every live instance (dispatch/fleet-counters.ts). */
  fleet: Pick<FleetCounters, 'read'>;
  queues: JobQueues;
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
    const fleet = await this.opts.fleet.read();
    return {
      kinds: KINDS.map((spec) => {
        const k = fleet.kinds[spec.kind];
        return {
          kind: spec.kind,
          rollout: spec.rollout,
          description: spec.description,
          workers: k?.workers ?? 0,
          workers_by_tier: k ? { ...k.by_tier } : zeroByTier(),
          input_schema: spec.inputSchema,
          output_artifacts: spec.output.artifacts,
          output_schema: spec.output.schema,
        };
      }),
    };
  }

  async capacity() {
    const [fleet, counts] = await Promise.all([this.opts.fleet.read(), this.queueCountsCached()]);
    const queued = (kind: string) => TIERS.reduce((n, tier) => n + (counts.get(`${kind}|${tier}`)?.queued ?? 0), 0);
    return {
      workers: { total: fleet.workers, by_tier: fleet.by_tier },
      slots: { total: fleet.slots, busy: fleet.busy, free: fleet.slots - fleet.busy },
      jobs: {
        queued: [...counts.values()].reduce((n, c) => n + c.queued, 0),
        running: [...counts.values()].reduce((n, c) => n + c.running, 0),
      },
      by_kind: KINDS.map(({ kind }) => {
        const k = fleet.kinds[kind];
        return { kind, workers: k?.workers ?? 0, slots_free: k ? k.slots - k.busy : 0, queued: queued(kind) };
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

  private async queueCounts(): Promise<Map<string, { queued: number; running: number }>> {
    const entries = await Promise.all(
      KINDS.flatMap(({ kind }) =>
        TIERS.map(async (tier) => {
          const c = await this.opts.queues.queue(kind, tier).getJobCounts('wait', 'prioritized', 'delayed', 'active');
          return [`${kind}|${tier}`, { queued: (c.wait ?? 0) + (c.prioritized ?? 0) + (c.delayed ?? 0), running: c.active ?? 0 }] as const;
        }),
      ),
    );
    return new Map(entries);
  }
}
