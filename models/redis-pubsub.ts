import calculateSlot from 'cluster-key-slot';
import type { Cluster } from 'ioredis';
import { isCluster, type RedisClient } from './redis-connection.js';

type Off = () => void;

/**
 * The gateway's pub/sub, the one place that picks its commands (docs/architecture.md, "Redis
 * Cluster"). On one server: PUBLISH / SUBSCRIBE / UNSUBSCRIBE and `message`. On a cluster:
 * sharded pub/sub (SPUBLISH / SSUBSCRIBE / SUNSUBSCRIBE and `smessage`), so a message goes only
 * to the shard that serves its channel's slot; a plain PUBLISH is broadcast to every node over
 * the cluster bus, which cost a cluster 13-17 µs of Redis per job against under 6 on one server
 * (docs/benchmarks.md, "Issue 31"). A cluster subscriber must be made with `subscriber: true`
 * (createRedis): ioredis then keeps one subscriber connection per primary that serves a
 * subscribed slot, and moves its subscriptions when a slot moves or its node fails.
 */
export const pubsub = {
  /** The publish command for `redis`, for a script that publishes (models/redis/scripts/includes/append-events.ts). */
  command(redis: RedisClient): 'SPUBLISH' | 'PUBLISH' {
    return isCluster(redis) ? 'SPUBLISH' : 'PUBLISH';
  },

  publish(redis: RedisClient, channel: string, message: string | Buffer): Promise<unknown> {
    return isCluster(redis) ? redis.spublish(channel, message) : redis.publish(channel, message);
  },

  /** Resolves once Redis confirmed every channel: messages published afterwards reach the listeners. */
  async subscribe(sub: RedisClient, channels: string[]): Promise<void> {
    if (channels.length === 0) return;
    if (!isCluster(sub)) {
      await sub.subscribe(...channels);
      return;
    }
    shardedSubscriber(sub);
    await Promise.all(bySlot(channels).map((same) => sub.ssubscribe(...same)));
  },

  async unsubscribe(sub: RedisClient, channels: string[]): Promise<void> {
    if (channels.length === 0) return;
    if (!isCluster(sub)) {
      await sub.unsubscribe(...channels);
      return;
    }
    await Promise.all(bySlot(channels).map((same) => sub.sunsubscribe(...same)));
  },

  /** Listens to messages as text; returns the function that stops it. */
  onMessage(sub: RedisClient, listener: (channel: string, message: string) => void): Off {
    const event = isCluster(sub) ? 'smessage' : 'message';
    sub.on(event, listener);
    return () => void sub.off(event, listener);
  },

  /**
   * Listens to messages as bytes. On one server a connection with only buffer listeners is
   * spared ioredis's decoding of each message as text; a cluster's sharded subscribers always
   * decode (ioredis 6 listens to both events on them).
   */
  onMessageBuffer(sub: RedisClient, listener: (channel: Buffer, message: Buffer) => void): Off {
    const event = isCluster(sub) ? 'smessageBuffer' : 'messageBuffer';
    sub.on(event, listener);
    return () => void sub.off(event, listener);
  },

  /**
   * Calls `listener` each time the subscriptions were made again after a reconnect, when
   * messages published meanwhile were lost: one server's `ready`; on a cluster, ioredis's
   * `subscribersReady`, after it replaced the sharded subscribers of a failed node or moved
   * slot and sent their SSUBSCRIBEs again (also after any change of the slot map, a harmless
   * extra). A cluster client gives no `ready` for either.
   */
  onResubscribed(sub: RedisClient, listener: () => void): Off {
    const event = isCluster(sub) ? 'subscribersReady' : 'ready';
    sub.on(event, listener);
    return () => void sub.off(event, listener);
  },
};

/** A cluster client without sharded subscribers would send SSUBSCRIBE to one node, which answers MOVED for the slots it does not serve. */
function shardedSubscriber(sub: Cluster): void {
  if (!sub.options.shardedSubscribers) throw new Error('a Redis Cluster subscriber must be made with createRedis(..., { subscriber: true })');
}

/** One SSUBSCRIBE names channels of one slot only (ioredis refuses others as CROSSSLOT). */
function bySlot(channels: string[]): string[][] {
  const groups = new Map<number, string[]>();
  for (const channel of channels) {
    const slot = calculateSlot(channel);
    const group = groups.get(slot);
    if (group) group.push(channel);
    else groups.set(slot, [channel]);
  }
  return [...groups.values()];
}
