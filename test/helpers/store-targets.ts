import { randomBytes } from 'node:crypto';
import type { Context } from 'mocha';
import { MongoStores } from '../../models/mongo/mongo-stores.js';
import { RedisStores } from '../../models/redis/redis-stores.js';
import type { Stores } from '../../models/stores.js';
import type { RedisClient } from '../../models/redis-connection.js';
import { redisTarget, type RedisTarget } from '../../models/redis-target.js';
import { REDIS_URL, cleanupPrefix, testRedis, uniquePrefix } from './harness.js';
import { clusterNodes } from './redis-cluster.js';

/**
 * One contract, every store: Redis always (one server, and a Redis Cluster wherever redis-server and
 * redis-cli are installed), MongoDB wherever MONGO_URL points at a replica set.
 */
export interface Target {
  name: string;
  /** `peer` opens the same data on a second connection, as a second gateway instance would (teardown closes it). */
  open(): Promise<{ stores: Stores; peer(): Promise<Stores>; teardown(): Promise<void> }>;
  /** Run in the suite's `before` with mocha's `this`: what the target needs first (a cluster to be up). */
  prepare?(ctx: Context): Promise<void>;
}

export const storeOptions = { retentionSeconds: 3600, fairShareStep: 3 };

/** Redis stores under a fresh prefix on `target` (one server, or a cluster). */
async function openRedis(target: RedisTarget, cluster: boolean): ReturnType<Target['open']> {
  const prefix = uniquePrefix('store', cluster);
  const redis = testRedis('test-store', target);
  const peers: RedisClient[] = [];
  return {
    stores: new RedisStores(redis, prefix, storeOptions),
    async peer() {
      const other = testRedis('test-store-peer', target);
      peers.push(other);
      return new RedisStores(other, prefix, storeOptions);
    },
    async teardown() {
      redis.disconnect();
      for (const other of peers) other.disconnect();
      await cleanupPrefix(prefix, target);
    },
  };
}

/** The cluster the cluster target runs on: the one the run was given (REDIS_CLUSTER_NODES), else the process's shared one. */
let clusterTarget: RedisTarget | undefined;

export const storeTargets: Target[] = [
  { name: 'redis', open: () => openRedis(redisTarget(REDIS_URL), false) },
  {
    // A real Redis Cluster (3 primaries, 3 replicas; test/helpers/redis-cluster.ts), under a
    // hash-tagged prefix as the gateway makes it there: every script, MULTI and pipeline of
    // the stores must keep to one slot, or the cluster refuses it (CROSSSLOT).
    name: 'redis cluster',
    async prepare(ctx) {
      clusterTarget ??= redisTarget(REDIS_URL, await clusterNodes(ctx));
    },
    open: () => openRedis(clusterTarget!, true),
  },
];
if (process.env.MONGO_URL) {
  storeTargets.push({
    name: 'mongodb',
    async open() {
      const db = `switchyard_test_${randomBytes(4).toString('hex')}`;
      const stores = await MongoStores.connect(process.env.MONGO_URL!, db, storeOptions);
      const peers: MongoStores[] = [];
      return {
        stores,
        async peer() {
          const other = await MongoStores.connect(process.env.MONGO_URL!, db, storeOptions);
          peers.push(other);
          return other;
        },
        async teardown() {
          for (const other of peers) await other.close();
          await stores.dropDatabase();
          await stores.close();
        },
      };
    },
  });
}


/**
 * The contract's frame: one `describe` per store target, its stores opened before the tests and
 * torn down after. `body` gets them as `stores` (a stand-in that reaches the target's stores
 * once `before` has opened them, so tests use it as the stores themselves) and `peer`.
 */
export function describeEachStore(body: (stores: Stores, peer: () => Promise<Stores>, target: Target) => void): void {
  for (const target of storeTargets) {
    describe(target.name, () => {
      let opened: Awaited<ReturnType<Target['open']>> | undefined;
      before(async function () {
        await target.prepare?.(this);
        opened = await target.open();
      });
      after(async () => opened?.teardown());
      const stores = new Proxy({} as Stores, {
        get: (_t, prop) => {
          if (!opened) throw new Error(`${target.name} stores used before they were opened (outside a test or hook)`);
          return Reflect.get(opened.stores, prop, opened.stores);
        },
      });
      body(stores, () => opened!.peer(), target);
    });
  }
}
