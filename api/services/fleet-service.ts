import { effectiveTier, type WorkerRegistry, type WorkerInfo } from '../../dispatch/worker-registry.js';
import type { JobQueues } from '../../queues/job-queues.js';
import { KINDS, TIERS, type Tier } from '../../queues/kinds.js';

type ByTier = Record<Tier, number>;
const zeroByTier = (): ByTier => ({ open: 0, trusted: 0, private: 0 });

export interface FleetServiceOptions {
  registry: WorkerRegistry;
  queues: JobQueues;
  /** Capacity answers are public and cost a read of every queue: they are cached this long. @defaultValue 1000 */
  cacheMs?: number;
}

/**
 * What the fleet can do right now, built only from the workers connected at this moment (on
 * any instance: the registry is shared and expires the workers of a dead gateway).
 */
export class FleetService {
  private cached?: { at: number; value: Promise<unknown> };

  constructor(private readonly opts: FleetServiceOptions) {}

  async capabilities() {
    const workers = await this.opts.registry.live();
    return {
      kinds: KINDS.map((spec) => {
        const serving = workers.filter((w) => w.kinds.includes(spec.kind));
        const byTier = zeroByTier();
        for (const w of serving) byTier[effectiveTier(w)]++;
        return { kind: spec.kind, rollout: spec.rollout, description: spec.description, workers: serving.length, workers_by_tier: byTier, input_schema: spec.inputSchema };
      }),
    };
  }

  capacity() {
    const now = Date.now();
    if (!this.cached || now - this.cached.at > (this.opts.cacheMs ?? 1000)) {
      this.cached = { at: now, value: this.computeCapacity() };
      this.cached.value.catch(() => (this.cached = undefined));
    }
    return this.cached.value;
  }

  private async computeCapacity() {
    const [workers, counts] = await Promise.all([this.opts.registry.live(), this.queueCounts()]);
    const byTier = zeroByTier();
    let slots = 0;
    let busy = 0;
    for (const w of workers) {
      byTier[effectiveTier(w)]++;
      slots += w.slots;
      busy += Math.min(w.busy, w.slots);
    }
    const queued = (kind: string) => TIERS.reduce((n, tier) => n + (counts.get(`${kind}|${tier}`)?.queued ?? 0), 0);
    return {
      workers: { total: workers.length, by_tier: byTier },
      slots: { total: slots, busy, free: slots - busy },
      jobs: {
        queued: [...counts.values()].reduce((n, c) => n + c.queued, 0),
        running: [...counts.values()].reduce((n, c) => n + c.running, 0),
      },
      by_kind: KINDS.map(({ kind }) => {
        const serving = workers.filter((w: WorkerInfo) => w.kinds.includes(kind));
        return { kind, workers: serving.length, slots_free: serving.reduce((n, w) => n + Math.max(0, w.slots - w.busy), 0), queued: queued(kind) };
      }),
      updated_at: new Date().toISOString(),
    };
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
