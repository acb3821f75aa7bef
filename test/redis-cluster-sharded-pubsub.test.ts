import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Redis } from 'ioredis';
import { createRedis, primariesOf, type RedisClient } from '../models/redis-connection.js';
import { pubsub } from '../models/redis-pubsub.js';
import { RedisKeys } from '../models/redis/keys.js';
import { redisTarget } from '../models/redis-target.js';
import { GatewayProcess } from './helpers/gateway-process.js';
import { ADMIN_TOKEN, REDIS_URL, cleanupPrefix, until } from './helpers/harness.js';
import { RawWorker } from './helpers/raw-worker.js';
import { clusterNodes } from './helpers/redis-cluster.js';
import { everyNode } from './helpers/redis-nodes.js';
import { SseClient } from './helpers/sse-client.js';

/** Calls of PUBLISH and SPUBLISH so far, summed over `nodes` (INFO commandstats counts those a script makes too). */
async function publishCalls(nodes: Redis[]): Promise<{ publish: number; spublish: number }> {
  const sum = { publish: 0, spublish: 0 };
  for (const node of nodes) {
    const stats = await node.info('commandstats');
    for (const name of ['publish', 'spublish'] as const) sum[name] += Number(new RegExp(`^cmdstat_${name}:calls=(\\d+)`, 'm').exec(stats)?.[1] ?? 0);
  }
  return sum;
}

/**
 * Sharded pub/sub on a Redis Cluster (docs/architecture.md, "Redis Cluster"): a gateway on a
 * cluster subscribes with SSUBSCRIBE on the primary that serves its channels' slot and publishes
 * with SPUBLISH, so no message is broadcast over the cluster bus to every node as PUBLISH's are.
 */
describe('sharded pub/sub on a Redis Cluster', function () {
  this.timeout(60_000);
  const prefix = `sytest-cluster-spub-${randomBytes(4).toString('hex')}`;
  const tagged = `{${prefix}}`;
  let nodes: string;
  let redis: RedisClient;
  let dir: string;
  let gw: GatewayProcess | undefined;

  before(async function () {
    nodes = await clusterNodes(this);
    redis = createRedis(redisTarget(REDIS_URL, nodes), { name: 'test-spub' });
    dir = mkdtempSync(path.join(os.tmpdir(), 'sy-cluster-spub-'));
    gw = await new GatewayProcess({ REDIS_CLUSTER_NODES: nodes, REDIS_PREFIX: prefix, DATA_DIR: dir }).start();
  });

  after(async () => {
    await gw?.kill();
    if (nodes) await cleanupPrefix(tagged, redisTarget(REDIS_URL, nodes));
    redis?.disconnect();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("runs a job end to end with its channels only on its slot's primary, and publishes with SPUBLISH, never PUBLISH", async () => {
    const all = await everyNode(redis);
    const primaries = await primariesOf(redis);
    const account = await gw!.call('POST', '/v1/admin/accounts', ADMIN_TOKEN, { name: 'spub', credits: 1000 });
    assert.equal(account.status, 201, JSON.stringify(account.body));
    const key: string = account.body.api_key;
    const operator = await gw!.call('POST', '/v1/admin/operators', ADMIN_TOKEN, { name: 'spub-op', trust: 'open' });
    const worker = await new RawWorker(gw!.url, operator.body.worker_token).connect({ kinds: ['inference:image:generate'] });
    try {
      const before = await publishCalls(all);
      const submitted = await gw!.call('POST', '/v1/jobs', key, { kind: 'inference:image:generate', input: { prompt: 'sharded' } });
      assert.equal(submitted.status, 202, JSON.stringify(submitted.body));
      const runId: string = submitted.body.run_id;
      const lease = await worker.lease();
      assert.equal(lease.run_id, runId);
      const sse = await new SseClient(`${gw!.url}/v1/jobs/${runId}/events`, key).open();
      try {
        await sse.until((c) => c.frames.length >= 1);
        // While the run is followed: its channel (in its account group's slot, models/redis/keys.ts)
        // and the dispatcher's (in the prefix's) are shard channels of the primary serving each
        // one's slot, and of no other node; no node has a plain channel of them.
        const runChannel = new RedisKeys(tagged).runEvents(runId);
        const held = await Promise.all(primaries.map(async (n) => (await n.call('PUBSUB', 'SHARDCHANNELS')) as string[]));
        for (const channel of [runChannel, `${tagged}:chan:queued`, `${tagged}:chan:cancel`, `${tagged}:chan:workers`, `${tagged}:chan:operators`]) {
          const owners = primaries.filter((_, i) => held[i].includes(channel));
          assert.equal(owners.length, 1, `${channel} is a shard channel of ${owners.length} primaries`);
          const slot = (await redis.cluster('KEYSLOT', channel)) as number;
          assert.equal(await owners[0].call('CLUSTER', 'MYID'), await nodeOfSlot(redis, slot), `the node holding ${channel} serves its slot`);
        }
        const base = tagged.replace(/[{}]/g, '');
        for (const node of all) assert.deepEqual([...(await node.pubsub('CHANNELS', `${tagged}:*`)), ...(await node.pubsub('CHANNELS', `${base}:*`))], [], `plain channels on ${node.options.port}`);

        // Acknowledged once logged and published (the submission's announcement was published too).
        await worker.report(lease, { type: 'log', line: 'live, over SPUBLISH' });
        const after = await publishCalls(all);
        assert.equal(after.publish - before.publish, 0, 'PUBLISH calls');
        assert.ok(after.spublish - before.spublish >= 2, `SPUBLISH calls: ${after.spublish - before.spublish}`);
        await worker.complete(lease, []);
        await sse.until((c) => c.frames.some((f) => f.event === 'done'), 20_000);
        assert.ok(sse.frames.some((f) => f.event === 'log' && f.data.line === 'live, over SPUBLISH'), 'the log line came live');
      } finally {
        sse.close();
      }
    } finally {
      worker.close();
    }
  });

  it('subscribes channels of different slots with one call, and refuses a cluster subscriber without sharded subscribers', async () => {
    const target = redisTarget(REDIS_URL, nodes);
    const sub = createRedis(target, { name: 'test-spub-sub', subscriber: true });
    const plain = createRedis(target, { name: 'test-spub-plain', blocking: true });
    try {
      // Three slots, most likely on different primaries: each SSUBSCRIBE goes to its slot's.
      const channels = ['a', 'b', 'c'].map((tag) => `{${prefix}-${tag}}:chan`);
      const got: string[] = [];
      pubsub.onMessage(sub, (channel, message) => got.push(`${channel} ${message}`));
      await pubsub.subscribe(sub, channels);
      for (const channel of channels) await pubsub.publish(redis, channel, 'hello');
      await until('every message', async () => got.length === channels.length);
      assert.deepEqual(got.sort(), channels.map((c) => `${c} hello`).sort());
      await pubsub.unsubscribe(sub, channels);
      const left = await Promise.all((await primariesOf(redis)).map(async (n) => (await n.call('PUBSUB', 'SHARDCHANNELS', `{${prefix}-*`)) as string[]));
      assert.deepEqual(left.flat(), []);
      await assert.rejects(pubsub.subscribe(plain, channels), /subscriber: true/);
    } finally {
      sub.disconnect();
      plain.disconnect();
    }
  });
});

/** The id of the primary serving `slot` (CLUSTER SLOTS). */
async function nodeOfSlot(redis: RedisClient, slot: number): Promise<string> {
  const range = (await redis.cluster('SLOTS')).find(([from, to]) => slot >= from && slot <= to)!;
  return range[2][2];
}
