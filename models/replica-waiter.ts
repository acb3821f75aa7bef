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
  /**
   * The probe of a queue's slot, when queues live apart from the stores' slot (spread on a
   * Redis Cluster: `RedisKeys.queueReplicaWaitProbe`): a job's add is then on another primary,
   * which the stores' probe does not cover. Absent: a queue's writes are on the stores' slot.
   */
  queueProbeKey?: (queue: string) => string;
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

/** The group commit of one probe key: the round in flight and the callers for the next. */
interface Lane {
  inFlight: boolean;
  next: Waiter[];
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
  /** One lane per probe key (per slot waited on); a lane goes when it has no caller. */
  private readonly lanes = new Map<string, Lane>();

  constructor(private readonly opts: ReplicaWaiterOptions) {}

  /**
   * Resolves once every write answered before this call is on the replicas. Short of them (the
   * WAIT timed out, or failed with its primary), `stillThere` asks the store whether the write
   * survived (it reads from whichever primary serves the slot now): if it did, the answer goes
   * out with the shortfall counted; if it did not, or cannot be read, this throws a
   * `ReplicaWaitError` (a 503 for a caller; a worker sends its report again), never a success
   * for a write a failover took away.
   */
  async after(step: DurableStep, stillThere: () => Promise<boolean>, probeKey = this.opts.probeKey): Promise<void> {
    const started = performance.now();
    const acked = await this.waitOn(probeKey);
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

  /**
   * Whether the writes answered before this call on `queue` (a job's add) are on the replicas:
   * true at once when queues share the stores' slot (`after` covers them). Short of them it
   * says so rather than throwing: the caller leaves the run unconfirmed, and the enqueue
   * reconciler adds its job again (an add is idempotent) if a failover took it.
   */
  async queueWrites(queue: string): Promise<boolean> {
    if (!this.opts.queueProbeKey) return true;
    return (await this.waitOn(this.opts.queueProbeKey(queue))) >= this.opts.replicas;
  }

  /** The acknowledgements of the next round on `probeKey`'s lane. */
  private waitOn(probeKey: string): Promise<number> {
    let lane = this.lanes.get(probeKey);
    if (!lane) this.lanes.set(probeKey, (lane = { inFlight: false, next: [] }));
    const joined = lane;
    return new Promise<number>((resolve) => {
      joined.next.push({ resolve });
      if (!joined.inFlight) void this.round(probeKey, joined);
    });
  }

  private async round(probeKey: string, lane: Lane): Promise<void> {
    lane.inFlight = true;
    while (lane.next.length > 0) {
      const waiters = lane.next;
      lane.next = [];
      const acked = await this.waitOnce(probeKey);
      for (const w of waiters) w.resolve(acked);
    }
    lane.inFlight = false;
    this.lanes.delete(probeKey);
  }

  /** One probe write and WAIT in one round trip (on a cluster, both to the probe key's primary). */
  private async waitOnce(probeKey: string): Promise<number> {
    const { redis, replicas, timeoutMs } = this.opts;
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
