import type { Redis } from 'ioredis';
import type { Tier } from '../queues/kinds.js';

/** A connected worker as every gateway instance sees it. */
export interface WorkerInfo {
  worker_id: string;
  kinds: string[];
  tier: Tier;
  slots: number;
  busy: number;
  gateway_id: string;
  owner: { type: 'operator' | 'account'; id: string };
  hardware: Record<string, unknown>;
  software: Record<string, unknown>;
  connected_at: string;
  /** Private workers: when their current attestation evidence expires (null: none valid). */
  attested_until?: string | null;
  /** Private workers: the tier they serve while their evidence has lapsed (their token's trust). */
  fallback_tier?: Tier;
}

/**
 * The tier a worker counts under right now: a private worker whose evidence has lapsed takes
 * no private work until it attests again, so it is not counted as private meanwhile.
 */
export function effectiveTier(w: WorkerInfo, now = Date.now()): Tier {
  if (w.tier !== 'private') return w.tier;
  return w.attested_until && Date.parse(w.attested_until) > now ? 'private' : (w.fallback_tier ?? 'open');
}

export interface WorkerRegistryOptions {
  redis: Redis;
  prefix: string;
  /** An entry not refreshed for this long is gone (its gateway died). @defaultValue 15000 */
  ttlMs?: number;
}

/**
 * The live fleet in Redis, shared by every gateway instance: a sorted set of worker ids scored
 * by expiry plus one record per worker. A gateway refreshes its workers on their heartbeats, so
 * the workers of a gateway that dies drop out within `ttlMs`; a disconnect removes one at once.
 */
export class WorkerRegistry {
  readonly ttlMs: number;

  constructor(private readonly opts: WorkerRegistryOptions) {
    this.ttlMs = opts.ttlMs ?? 15_000;
  }

  private get index(): string {
    return `${this.opts.prefix}:workers`;
  }

  private record(id: string): string {
    return `${this.opts.prefix}:worker:${id}`;
  }

  async put(info: WorkerInfo): Promise<void> {
    await this.opts.redis
      .multi()
      .set(this.record(info.worker_id), JSON.stringify(info), 'PX', this.ttlMs)
      .zadd(this.index, Date.now() + this.ttlMs, info.worker_id)
      .exec();
  }

  async remove(workerId: string): Promise<void> {
    await this.opts.redis.multi().del(this.record(workerId)).zrem(this.index, workerId).exec();
  }

  /** Every worker whose entry has not expired, read in two round trips. */
  async live(): Promise<WorkerInfo[]> {
    const now = Date.now();
    const ids = await this.opts.redis.zrangebyscore(this.index, now, '+inf');
    // Trim the dead entries as we go; an expired record has already vanished on its own.
    void this.opts.redis.zremrangebyscore(this.index, '-inf', now - 1).catch(() => {});
    if (ids.length === 0) return [];
    const raw = await this.opts.redis.mget(ids.map((id) => this.record(id)));
    return raw.filter((r): r is string => r !== null).map((r) => JSON.parse(r) as WorkerInfo);
  }
}
