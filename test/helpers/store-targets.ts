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
  open(): Promise<{ stores: Stores; teardown(): Promise<void> }>;
}

export const storeOptions = { retentionSeconds: 3600, fairShareStep: 3 };

export const storeTargets: Target[] = [
  {
    name: 'redis',
    async open() {
      const prefix = uniquePrefix('store');
      const redis = new Redis(REDIS_URL);
      return {
        stores: new RedisStores(redis, prefix, storeOptions),
        async teardown() {
          redis.disconnect();
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
      return {
        stores,
        async teardown() {
          await stores.dropDatabase();
          await stores.close();
        },
      };
    },
  });
}

