import type { RedisClient } from '../../models/redis-connection.js';
import type { Logger } from 'pino';
import type { Tier } from '../../models/kinds.js';
import { RedisKeys } from '../../models/redis/keys.js';
import { redisScripts } from '../../models/redis/redis-scripts.js';
import { attestedAt, offersLeases, type ConnectedWorker } from '../connected-worker.js';

/** One rank worker's seat for one ranked model, as every instance reads it. */
export interface RankSeat {
  workerId: string;
  /** Pipelines it could join now (its free slots). */
  free: number;
  expiresAt: number;
  /** The instance its socket is on. */
  gatewayId: string;
  rank: number;
  count: number;
  /** The tiers of work it takes now (a private worker's `private` only while its evidence is valid). */
  tiers: Tier[];
}

export interface RankSeatsOptions {
  redis: RedisClient;
  prefix: string;
  gatewayId: string;
  /** A seat not rewritten within this long is not claimed (its instance died). */
  ttlMs: number;
  /** Rank leases the worker holds of the model (its `max_concurrency` bounds them). */
  leasesOf(worker: ConnectedWorker, kind: string, model: string): number;
  /** The workers attached here now. */
  attached(workerId: string): ConnectedWorker | undefined;
  /** A seat with room was written: a waiting pipeline may form now. */
  roomFor(kind: string, model: string): void;
  log: Logger;
}

/** A private worker's evidence must outlive a seat claim by this much for it to offer private seats. */
const PRIVATE_MARGIN_MS = 1_000;

const ranked = (worker: ConnectedWorker) =>
  Object.entries(worker.info.models).flatMap(([kind, models]) => models.filter((m) => m.rank).map((m) => ({ kind, model: m.id, rank: m.rank!, max: m.max_concurrency })));

/**
 * The seats of this instance's rank workers in Redis, where any instance forming a pipeline reads
 * and claims them (docs/ranks.md, "Gang leasing"). A worker's seats are rewritten from its real
 * state whenever it changes (joins, leaves, takes or ends a lease, its backend or models change),
 * batched per event-loop turn, and refreshed before they expire; a claim takes one free slot of
 * each rank atomically (`claimRankSeats`), so two instances never gang the same free slot twice.
 */
export class RankSeats {
  private readonly keys: RedisKeys;
  private readonly dirty = new Set<ConnectedWorker>();
  /** The seat keys each local worker has written, so a model it stops serving loses its seat. */
  private readonly written = new Map<string, Set<string>>();
  private flushing: Promise<void> | null = null;

  constructor(private readonly opts: RankSeatsOptions) {
    this.keys = new RedisKeys(opts.prefix);
  }

  seatsKey(kind: string, model: string): string {
    return this.keys.rankSeats(kind, model);
  }

  /**
   * Whether a worker attached here has a seat of the model (as of the last rewrite): only the
   * rank workers are looked at, not every worker, since every announced model job asks.
   */
  servedHere(kind: string, model: string): boolean {
    const key = this.seatsKey(kind, model);
    for (const keys of this.written.values()) if (keys.has(key)) return true;
    return false;
  }

  /** The worker's state changed: its seats are rewritten at the end of this turn. */
  changed(worker: ConnectedWorker): void {
    if (!this.written.has(worker.info.worker_id) && !ranked(worker).length) return;
    this.dirty.add(worker);
    this.flushing ??= new Promise<void>((resolve) => setImmediate(resolve)).then(() => this.flush());
  }

  /** Rewrites every local worker's seats now (their expiry too). */
  async refresh(workers: Iterable<ConnectedWorker>): Promise<void> {
    for (const w of workers) this.changed(w);
    await this.flushing;
  }

  private async flush(): Promise<void> {
    const workers = [...this.dirty];
    this.dirty.clear();
    this.flushing = null;
    const now = Date.now();
    const batch = this.opts.redis.pipeline();
    const room: Array<[string, string]> = [];
    for (const worker of workers) {
      const id = worker.info.worker_id;
      const keys = new Set<string>();
      const here = this.opts.attached(id) === worker;
      if (here) {
        const tiers = (worker.tiers ?? [worker.info.tier]).filter((t) => t !== 'private' || attestedAt(worker, now + PRIVATE_MARGIN_MS));
        for (const { kind, model, rank, max } of ranked(worker)) {
          const key = this.seatsKey(kind, model);
          const held = this.opts.leasesOf(worker, kind, model);
          const free = offersLeases(worker) ? Math.max(0, Math.min(worker.info.slots - worker.leases.size, (max ?? Infinity) - held)) : 0;
          batch.hset(key, id, `${free} ${now + this.opts.ttlMs} ${this.opts.gatewayId} ${rank.index} ${rank.count} ${tiers.join(',') || '-'}`);
          keys.add(key);
          if (free > 0) room.push([kind, model]);
        }
      }
      for (const key of this.written.get(id) ?? []) if (!keys.has(key)) batch.hdel(key, id);
      if (keys.size) this.written.set(id, keys);
      else this.written.delete(id);
    }
    try {
      await batch.exec();
    } catch (err) {
      this.opts.log.warn({ err }, 'could not write rank seats; the next refresh does');
      return;
    }
    for (const [kind, model] of room) this.opts.roomFor(kind, model);
  }

  /** The seats of a model's rank workers, live or not (the caller filters). */
  async list(kind: string, model: string): Promise<RankSeat[]> {
    const all = await this.opts.redis.hgetall(this.seatsKey(kind, model));
    const out: RankSeat[] = [];
    for (const [workerId, raw] of Object.entries(all)) {
      const [free, expiresAt, gatewayId, rank, count, tiers] = raw.split(' ');
      out.push({ workerId, free: Number(free), expiresAt: Number(expiresAt), gatewayId, rank: Number(rank), count: Number(count), tiers: tiers === '-' ? [] : (tiers.split(',') as Tier[]) });
    }
    return out;
  }

  /** Takes one free slot of each worker's seat, all or none. */
  async claim(kind: string, model: string, workerIds: string[]): Promise<boolean> {
    return (await redisScripts.run(this.opts.redis, 'claimRankSeats', [this.seatsKey(kind, model)], [Date.now(), ...workerIds])) === 1;
  }

  /** Gives back seats claimed for a pipeline that did not form. */
  async release(kind: string, model: string, workerIds: string[]): Promise<void> {
    await redisScripts.run(this.opts.redis, 'releaseRankSeats', [this.seatsKey(kind, model)], workerIds);
  }
}
