import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import type { Cluster } from 'ioredis';
import { createRedis } from '../models/redis-connection.js';
import { redisTarget } from '../models/redis-target.js';
import { defineScript } from '../models/redis/script-definition.js';
import { RedisScripts } from '../models/redis/redis-scripts.js';
import { REDIS_CLI, REDIS_SERVER, requireProgram } from './helpers/optional-program.js';
import { sharedCluster, type RedisCluster } from './helpers/redis-cluster.js';
import { scriptCommandsDuring } from './helpers/script-spy.js';

/**
 * `send` on a Redis Cluster: a script goes to the primary of its first key's slot, so it is known
 * to be loaded per node. The text (EVAL) goes until the script ran on that node's socket, its SHA
 * after, so a submission's create (sent with its job's add behind it) does not ship the script's
 * text every time on a cluster (64 µs of Redis per job in `npm run bench -- cycle --cluster`).
 */
describe('RedisScripts.send on a Redis Cluster', function () {
  this.timeout(60_000);
  let cluster: RedisCluster;
  let redis: Cluster;
  const tag = randomBytes(4).toString('hex');
  const scripts = new RedisScripts({ count: defineScript<number>({ name: 'count', keys: 1, lua: `return redis.call('INCRBY', KEYS[1], ARGV[1])` }) });
  const keys: string[] = [];

  /** `count` on `key`, and which of EVAL and EVALSHA carried it. */
  const sent = async (key: string) => {
    const { used, result } = await scriptCommandsDuring(redis, () => scripts.send(redis, 'count', [key], [1]));
    return { used, reply: result };
  };

  before(async function () {
    cluster = await sharedCluster({ server: requireProgram(this, REDIS_SERVER), cli: requireProgram(this, REDIS_CLI) });
    redis = createRedis(redisTarget('redis://127.0.0.1:6379', cluster.setting), { name: 'test-send-cluster' }) as Cluster;
    await redis.ping();
  });
  after(async () => {
    if (keys.length) await Promise.all(keys.map((k) => redis.del(k)));
    redis?.disconnect();
  });

  it("sends the text until the script ran on the primary of its key's slot, then its SHA, node by node", async () => {
    // One key on each primary: a hash tag per key, tried until the three primaries are covered.
    const byPrimary = new Map<number, string>();
    for (let i = 0; byPrimary.size < 3 && i < 200; i++) {
      const key = `{sy-send-${tag}-${i}}:n`;
      const port = await cluster.primaryOf(key);
      if (!byPrimary.has(port)) byPrimary.set(port, key);
    }
    assert.equal(byPrimary.size, 3, 'a key on each primary');
    for (const key of byPrimary.values()) {
      keys.push(key);
      assert.deepEqual(await sent(key), { used: ['eval'], reply: 1 }, `first on ${key}'s node`);
      assert.deepEqual(await sent(key), { used: ['evalsha'], reply: 2 }, `then by SHA on ${key}'s node`);
    }
  });
});
