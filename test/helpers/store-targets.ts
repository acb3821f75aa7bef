import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { MongoStores } from '../../models/mongo/mongo-stores.js';
import { RedisStores } from '../../models/redis/redis-stores.js';
import type { Stores } from '../../models/stores.js';
import { REDIS_URL, cleanupPrefix, uniquePrefix } from './harness.js';

/**
 * One contract, every store: Redis always, MongoDB wherever MONGO_URL points at a replica set.
 */
export interface Target {
  name: string;
  /** `peer` opens the same data on a second connection, as a second gateway instance would (teardown closes it). */
  open(): Promise<{ stores: Stores; peer(): Promise<Stores>; teardown(): Promise<void> }>;
}

export const storeOptions = { retentionSeconds: 3600, fairShareStep: 3 };

export const storeTargets: Target[] = [
  {
    name: 'redis',
    async open() {
      const prefix = uniquePrefix('store');
      const redis = new Redis(REDIS_URL);
      const peers: Redis[] = [];
      return {
        stores: new RedisStores(redis, prefix, storeOptions),
        async peer() {
          const other = new Redis(REDIS_URL);
          peers.push(other);
          return new RedisStores(other, prefix, storeOptions);
        },
        async teardown() {
          redis.disconnect();
          for (const other of peers) other.disconnect();
          await cleanupPrefix(prefix);
        },
      };
    },
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
      before(async () => {
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
