import type { RedisClient } from './redis-connection.js';

export interface ReplicaWaiterOptions {
  /**
   * A connection of its own (never the stores' or the queues'): WAIT blocks the connection it
   * runs on until the replicas answer, which on a shared one would hold every other command.
   */
  redis: RedisClient;
  /** REDIS_WAIT_REPLICAS: how many replicas must have a write before it is answered. */
  replicas: number;
  /** How long a WAIT may block before the answer goes out anyway (a shortfall). */
  timeoutMs: number;
  /**
   * A key in the hash slot of the writes waited for (on a Redis Cluster, the primary that must
   * replicate them): the probe write that gives this connection the primary's replication
   * offset goes there.
   */
  probeKey: string;
  /** A round that ended with fewer replicas than asked: `acked` of `wanted` (-1 when the WAIT failed). */
  shortfall?(acked: number, wanted: number, err?: unknown): void;
  /** Each caller's wait: which step, how long, and whether enough replicas acknowledged. */
  observe?(step: DurableStep, seconds: number, enough: boolean): void;
}

/** The writes waited for: a run accepted (created) or settled (made terminal). */
export type DurableStep = 'accept' | 'settle';

/** An accept or settle that could not be confirmed after a failover: the datastore's answer is "try again". */
export class ReplicaWaitError extends Error {
  override readonly name = 'ReplicaWaitError';
}

interface Waiter {
  resolve(acked: number): void;
}

/**
 * Durability across failover (REDIS_WAIT_REPLICAS): waits until the writes that accepted or
 * settled a run are on `replicas` replicas before the caller or worker is answered, so a
 * primary killed right after answering cannot take them with it (Redis replication is
 * asynchronous; its replica, promoted, would not know the run).
 *
 * WAIT counts the writes of the connection it runs on, and the gateway's writes go through the
 * stores' and queues' shared connections, where a blocking WAIT would stall everything behind
 * it. So the waiter writes a probe on its own connection first: the probe runs on the primary
 * after every write already answered there (one replication stream), so its offset covers them,
 * and WAIT on this connection waits for that offset. Rounds are group commits: callers that
 * arrive while a round is in flight share the next one, so one round trip to the replicas
 * serves any number of concurrent requests.
 */
export class ReplicaWaiter {
  private inFlight = false;
  private next: Waiter[] = [];

  constructor(private readonly opts: ReplicaWaiterOptions) {}

  /**
   * Resolves once every write answered before this call is on the replicas. Short of them (the
   * WAIT timed out, or failed with its primary), `stillThere` asks the store whether the write
   * survived (it reads from whichever primary serves the slot now): if it did, the answer goes
   * out with the shortfall counted; if it did not, or cannot be read, this throws a
   * `ReplicaWaitError` (a 503 for a caller; a worker sends its report again), never a success
   * for a write a failover took away.
   */
  async after(step: DurableStep, stillThere: () => Promise<boolean>): Promise<void> {
    const started = performance.now();
    const acked = await new Promise<number>((resolve) => {
      this.next.push({ resolve });
      if (!this.inFlight) void this.round();
    });
    const enough = acked >= this.opts.replicas;
    this.opts.observe?.(step, (performance.now() - started) / 1000, enough);
    if (enough) return;
    let there: boolean;
    try {
      there = await stillThere();
    } catch (err) {
      throw new ReplicaWaitError(`the ${step} was written but could not be read back after its replicas fell short`, { cause: err });
    }
    if (!there) throw new ReplicaWaitError(`the ${step} was lost with the Redis primary that took it (it failed before a replica had it)`);
  }

  private async round(): Promise<void> {
    this.inFlight = true;
    while (this.next.length > 0) {
      const waiters = this.next;
      this.next = [];
      const acked = await this.waitOnce();
      for (const w of waiters) w.resolve(acked);
    }
    this.inFlight = false;
  }

  /** One probe write and WAIT in one round trip (on a cluster, both to the probe key's primary). */
  private async waitOnce(): Promise<number> {
    const { redis, replicas, timeoutMs, probeKey } = this.opts;
    try {
      const replies = await redis.pipeline().set(probeKey, '1', 'PX', 60_000).call('WAIT', replicas, timeoutMs).exec();
      const failed = replies?.find(([err]) => err)?.[0];
      if (!replies || failed) throw failed ?? new Error('no reply to WAIT');
      const acked = Number(replies[1]![1]);
      if (acked < replicas) this.opts.shortfall?.(acked, replicas);
      return acked;
    } catch (err) {
      this.opts.shortfall?.(-1, replicas, err);
      return -1;
    }
  }
}
