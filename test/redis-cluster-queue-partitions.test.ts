import assert from 'node:assert/strict';
import { primariesOf, type RedisClient } from '../models/redis-connection.js';
import { redisTarget, type RedisTarget } from '../models/redis-target.js';
import { REDIS_URL, TestGateway, cleanupPrefix, testRedis, uniquePrefix } from './helpers/harness.js';
import { clusterNodes } from './helpers/redis-cluster.js';

const JOBS = 150;

/**
 * A hot kind on a real Redis Cluster of 3 primaries (docs/architecture.md, "Queue partitions"):
 * its queue split in 3 partitions (QUEUE_PARTITIONS=3), placed a third of the slot space apart,
 * so its jobs, and the BullMQ scripts that add and lease them, spread over every primary instead
 * of loading the one that held the kind's only queue.
 */
describe('Queue partitions on a Redis Cluster', function () {
  this.timeout(120_000);
  const prefix = uniquePrefix('qparts', true);
  let target: RedisTarget | undefined;
  let redis: RedisClient | undefined;
  let gw: TestGateway | undefined;

  before(async function () {
    const nodes = await clusterNodes(this);
    target = redisTarget(REDIS_URL, nodes);
    redis = testRedis('test-qparts', target);
    gw = await new TestGateway(prefix, { REDIS_CLUSTER_NODES: nodes, QUEUE_PARTITIONS: '3' }).start();
  });
  after(async () => {
    await gw?.stop();
    redis?.disconnect();
    if (target) await cleanupPrefix(prefix, target);
  });

  it("splits a kind's queue in 3 (QUEUE_PARTITIONS=3), a partition on each primary: none holds more than 45% of its jobs", async () => {
    assert.equal(gw!.config.queuePartitions, 3);
    const { key } = await gw!.account(10_000);
    for (let i = 0; i < JOBS; i += 25) {
      const sent = await Promise.all(Array.from({ length: 25 }, (_, k) => gw!.submit(key, { kind: 'inference:image:generate', input: { prompt: `p${i + k}` } })));
      assert.deepEqual([...new Set(sent.map((r) => r.status))], [202]);
    }
    // A job's hash is `<queue prefix>:<partition>:<run id>`: counted on each primary.
    const base = prefix.replace(/[{}]/g, '');
    const held: number[] = [];
    for (const node of await primariesOf(redis!)) {
      let n = 0;
      let cursor = '0';
      do {
        const [next, keys] = await node.scan(cursor, 'MATCH', `${base}:q:*:inference.image.generate.open#*of3:run_*`, 'COUNT', 1000);
        cursor = next;
        n += keys.length;
      } while (cursor !== '0');
      held.push(n);
    }
    assert.equal(held.length, 3);
    assert.equal(held.reduce((a, b) => a + b, 0), JOBS, `jobs per primary: ${held.join(' / ')}`);
    for (const n of held) assert.ok(n > 0 && n <= 0.45 * JOBS, `jobs per primary: ${held.join(' / ')}`);
  });
});
