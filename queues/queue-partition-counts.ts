import type { RedisClient } from '../models/redis-connection.js';

export interface QueuePartitionCountsOptions {
  redis: Pick<RedisClient, 'sadd' | 'smembers'>;
  /** The set of the partition counts jobs were ever queued under (`RedisKeys.queuePartitionCounts`). */
  key: string;
  /** This gateway's QUEUE_PARTITIONS: the count it queues jobs under. @defaultValue 1 */
  own?: number;
}

/**
 * The partition counts of a deployment (docs/architecture.md, "Queue partitions"). A gateway
 * queues jobs under its own count, recorded in Redis before its first job, so that every
 * dispatcher drains the partitions of every count any gateway has used: during a rolling change
 * of QUEUE_PARTITIONS, and after one, the jobs queued under the old count are still leased.
 * A count of 1 (the unsplit queue) is always drained: it is never recorded, and gateways from
 * before partitions queued there.
 */
export class QueuePartitionCounts {
  readonly own: number;
  private recorded?: Promise<void>;
  private known: readonly number[];

  constructor(private readonly opts: QueuePartitionCountsOptions) {
    this.own = opts.own ?? 1;
    this.known = [...new Set([1, this.own])];
  }

  /** Records this gateway's count (once per process; again after a failure): awaited before a job is queued. */
  record(): Promise<void> {
    this.recorded ??= this.opts.redis.sadd(this.opts.key, String(this.own)).then(
      () => undefined,
      (err: unknown) => {
        this.recorded = undefined;
        throw err;
      },
    );
    return this.recorded;
  }

  /** 1, every count recorded and this gateway's, ascending, as last read (`refresh`). */
  get all(): readonly number[] {
    return this.known;
  }

  /** Reads the counts again (one SMEMBERS); true when they changed. */
  async refresh(): Promise<boolean> {
    const read = (await this.opts.redis.smembers(this.opts.key)).map(Number).filter((n) => Number.isInteger(n) && n >= 1);
    const next = [...new Set([1, this.own, ...read])].sort((a, b) => a - b);
    const changed = next.length !== this.known.length || next.some((n, i) => n !== this.known[i]);
    this.known = next;
    return changed;
  }
}
