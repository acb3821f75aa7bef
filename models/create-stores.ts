import type { RedisClient } from './redis-connection.js';
import { MongoStores } from './mongo/mongo-stores.js';
import { RedisStores } from './redis/redis-stores.js';
import type { Stores } from './stores.js';

export interface StoreSelection {
  redis: RedisClient;
  redisPrefix: string;
  mongoUrl?: string;
  mongoDb: string;
  retentionSeconds: number;
  fairShareStep: number;
  /** The run event log's settings: the Redis run store then logs status changes in their transitions. */
  eventLog?: { maxLength: number; ttlMs: number };
}

/** Redis by default (nothing else to run); MongoDB when MONGO_URL is set. */
export async function createStores(sel: StoreSelection): Promise<Stores> {
  const opts = { retentionSeconds: sel.retentionSeconds, fairShareStep: sel.fairShareStep };
  if (sel.mongoUrl) return MongoStores.connect(sel.mongoUrl, sel.mongoDb, opts);
  return new RedisStores(sel.redis, sel.redisPrefix, { ...opts, ...(sel.eventLog ? { eventLog: sel.eventLog } : {}) });
}
