import calculateSlot from 'cluster-key-slot';
import { Cluster, Redis, type RedisOptions } from 'ioredis';
import { redisTarget, type RedisTarget } from './redis-target.js';

/**
 * A connection to the gateway's Redis: one server, or a Redis Cluster (ioredis's `Cluster`,
 * which sends each command to the primary of its key's slot). Both have the same commands;
 * what differs on a cluster is that every multi-key command, script, MULTI and pipeline must
 * keep its keys in one hash slot (docs/architecture.md, "Redis Cluster").
 */
export type RedisClient = Redis | Cluster;

export interface RedisConnectionOptions {
  /** Connection name shown by CLIENT LIST. */
  name: string;
  /**
   * Blocking consumers (BullMQ workers, subscribers) must wait out outages; request paths must
   * fail fast instead, so a caller gets a 503 rather than a hang.
   * @defaultValue false
   */
  blocking?: boolean;
  /**
   * Batch the commands of concurrent requests into one socket write per tick: far fewer
   * syscalls under load, no extra latency when idle.
   * @defaultValue false
   */
  autoPipelining?: boolean;
  /**
   * A pub/sub subscriber (models/redis-pubsub.ts). On a cluster it subscribes with SSUBSCRIBE,
   * which ioredis sends to the primary of each channel's slot only with `shardedSubscribers`.
   * Implies `blocking`. No difference on one server.
   * @defaultValue false
   */
  subscriber?: boolean;
}

/**
 * One place that builds ioredis clients, so every connection has the same outage behaviour.
 * `target` is the config's parsed `redis`, or a URL (a `redis+cluster://` one makes a cluster
 * client).
 */
export function createRedis(target: RedisTarget | string, opts: RedisConnectionOptions): RedisClient {
  const where = typeof target === 'string' ? redisTarget(target) : target;
  const options: RedisOptions = {
    connectionName: `switchyard:${opts.name}`,
    // BullMQ requires null on its connections; request paths retry once, then fail.
    maxRetriesPerRequest: opts.blocking || opts.subscriber ? null : 1,
    connectTimeout: 5_000,
    retryStrategy: (times) => Math.min(times * 100, 2_000),
    lazyConnect: false,
    enableAutoPipelining: opts.autoPipelining ?? false,
  };
  const client = where.kind === 'single' ? new Redis(where.url, options) : clusterClient(where, options, opts.subscriber ?? false);
  // ioredis emits 'error' on every failed reconnect; the callers see failures on their commands.
  client.on('error', () => {});
  return client;
}

function clusterClient(where: Extract<RedisTarget, { kind: 'cluster' }>, options: RedisOptions, subscriber: boolean): Cluster {
  const { retryStrategy, enableAutoPipelining, lazyConnect, ...perNode } = options;
  return new Cluster(where.nodes, {
    // The same outage behaviour as one server's: the cluster's own reconnects back off alike.
    // Its per-node connections keep ioredis's default of not reconnecting: a node that drops
    // is forgotten and the slot map asked again, which is how a failover's new primary is
    // found (a node connection retrying a dead primary held the gateway's slot there).
    clusterRetryStrategy: retryStrategy,
    enableAutoPipelining,
    lazyConnect,
    // One sharded subscriber connection per primary serving a subscribed slot, each made when
    // its first channel is; they reconnect through the slot map (ClusterSubscriberGroup).
    ...(subscriber && { shardedSubscribers: true }),
    redisOptions: {
      ...perNode,
      ...(where.username && { username: where.username }),
      ...(where.password !== undefined && { password: where.password }),
      ...(where.tls && { tls: {} }),
    },
  });
}

/**
 * A second connection like `client`, to the same server or cluster (each client type's own
 * `duplicate`, which keeps a cluster subscriber's sharded subscribers).
 */
export function duplicateRedis(client: RedisClient): RedisClient {
  const copy = isCluster(client) ? client.duplicate() : client.duplicate();
  copy.on('error', () => {});
  return copy;
}

/** Whether `client` is a cluster client, for the few commands a cluster answers per node (SCAN, KEYS). */
export function isCluster(client: RedisClient): client is Cluster {
  return client instanceof Cluster;
}

/**
 * The connections to send a per-node command to: every primary of a cluster (SCAN and KEYS see
 * only the keys of the node they reach), or the one server. A cluster client knows its primaries
 * only once it is ready (before, it holds the nodes it was given, which it drops on learning the
 * topology), so this waits for that.
 */
export async function primariesOf(client: RedisClient): Promise<Redis[]> {
  if (!isCluster(client)) return [client];
  if (client.status !== 'ready') {
    await new Promise<void>((resolve, reject) => {
      const ready = () => (client.off('end', ended), resolve());
      const ended = () => (client.off('ready', ready), reject(new Error('the Redis Cluster connection ended before it was ready')));
      client.once('ready', ready).once('end', ended);
    });
  }
  return client.nodes('master');
}

/**
 * The socket a command on `key` goes out on if it is written now, while it is connected: one
 * server's, or on a cluster the socket of the primary that serves the key's slot (what a
 * script's EVALSHA needs to know it ran there before). Undefined when that is not known.
 */
export function socketFor(redis: RedisClient, key: string | undefined): object | undefined {
  if (redis.status !== 'ready') return undefined;
  if (!isCluster(redis)) return redis.stream as object | undefined;
  if (key === undefined) return undefined;
  const nodeKey = redis.slots[calculateSlot(key)]?.[0];
  const node = nodeKey === undefined ? undefined : redis.nodes('master').find((n) => `${n.options.host}:${n.options.port}` === nodeKey);
  return node?.status === 'ready' ? (node.stream as object | undefined) : undefined;
}
