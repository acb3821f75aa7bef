import type { Redis } from 'ioredis';
import { isCluster, primariesOf, type RedisClient } from '../../models/redis-connection.js';

/**
 * Every node a per-node command must go to: the one server, or each node of a cluster, replicas
 * included (CLIENT LIST and PUBSUB NUMSUB answer for the node asked only; a cluster client's
 * subscriber connection may be on any node).
 */
export async function everyNode(redis: RedisClient): Promise<Redis[]> {
  await primariesOf(redis);
  return isCluster(redis) ? redis.nodes('all') : [redis];
}

/** The node serving `key`: the one server, or the primary of the key's slot (MONITOR sees only its node's commands). */
export async function nodeServing(redis: RedisClient, key: string): Promise<Redis> {
  const primaries = await primariesOf(redis);
  if (!isCluster(redis)) return redis;
  const slot = Number(await primaries[0]!.cluster('KEYSLOT', key));
  const [address] = redis.slots[slot]!;
  const node = primaries.find((n) => `${n.options.host}:${n.options.port}` === address);
  if (!node) throw new Error(`no primary serves slot ${slot} (${address})`);
  return node;
}

/**
 * The sum over every node of PUBSUB NUMSUB for each channel, in order; on a cluster SHARDNUMSUB,
 * since the gateway subscribes there with SSUBSCRIBE (models/redis-pubsub.ts).
 */
export async function subscribers(redis: RedisClient, channels: string[]): Promise<number[]> {
  const counts = channels.map(() => 0);
  const count = isCluster(redis) ? 'SHARDNUMSUB' : 'NUMSUB';
  for (const node of await everyNode(redis)) {
    const reply = (await node.call('PUBSUB', count, ...channels)) as Array<string | number>;
    channels.forEach((_, i) => (counts[i] += Number(reply[2 * i + 1])));
  }
  return counts;
}

/** KEYS `pattern` on every primary (a cluster client sends KEYS to one node only, which holds only its own slots). */
export async function keysMatching(redis: RedisClient, pattern: string): Promise<string[]> {
  const keys: string[] = [];
  for (const node of await primariesOf(redis)) keys.push(...(await node.keys(pattern)));
  return keys;
}
