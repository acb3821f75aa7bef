import type { RedisClient } from '../redis-connection.js';
import type { Stores } from '../stores.js';
import { RedisKeys } from './keys.js';
import { RedisAccountStore } from './redis-account-store.js';
import { RedisApiKeyStore } from './redis-api-key-store.js';
import { RedisBotStore } from './redis-bot-store.js';
import { RedisConversationStore } from './redis-conversation-store.js';
import { RedisIdempotencyStore } from './redis-idempotency-store.js';
import { RedisOperatorStore, RedisWorkerTokenStore } from './redis-operator-store.js';
import { RedisRunStore, type RedisRunStoreOptions } from './redis-run-store.js';
import { RedisToolStore } from './redis-tool-store.js';
import { RedisFileStore } from './redis-file-store.js';
import { RedisModelStore } from './redis-model-store.js';

/** The embedded default: every store in the Redis that also holds the queues. */
export class RedisStores implements Stores {
  readonly accounts: RedisAccountStore;
  readonly apiKeys: RedisApiKeyStore;
  readonly operators: RedisOperatorStore;
  readonly workerTokens: RedisWorkerTokenStore;
  readonly runs: RedisRunStore;
  readonly idempotency: RedisIdempotencyStore;
  readonly bots: RedisBotStore;
  readonly conversations: RedisConversationStore;
  readonly tools: RedisToolStore;
  readonly files: RedisFileStore;
  readonly models: RedisModelStore;

  constructor(private readonly redis: RedisClient, prefix: string, opts: RedisRunStoreOptions) {
    const keys = new RedisKeys(prefix);
    this.accounts = new RedisAccountStore(redis, keys);
    this.apiKeys = new RedisApiKeyStore(redis, keys);
    this.operators = new RedisOperatorStore(redis, keys);
    this.workerTokens = new RedisWorkerTokenStore(redis, keys);
    this.runs = new RedisRunStore(redis, keys, opts);
    this.idempotency = new RedisIdempotencyStore(redis, keys);
    this.bots = new RedisBotStore(redis, keys);
    this.conversations = new RedisConversationStore(redis, keys);
    this.tools = new RedisToolStore(redis, keys);
    this.files = new RedisFileStore(redis, keys);
    this.models = new RedisModelStore(redis, keys);
  }

  async ping(): Promise<void> {
    await this.redis.ping();
  }

  /** The connection belongs to the caller, who closes it. */
  async close(): Promise<void> {}
}
