import type { Config } from '../config.js';
import { UsageError } from '../usage-error.js';
import { ApiKeyAuthenticator } from '../../services/auth/api-key-authenticator.js';
import { RequestGate } from '../../services/auth/request-gate.js';
import { createStores } from '../../../models/create-stores.js';
import { createRedis } from '../../../models/redis-connection.js';
import { RedisKeys } from '../../../models/redis/keys.js';
import type { Stores } from '../../../models/stores.js';

/** Runs `fn` on the stores, without starting a gateway, and closes them. */
async function withStores<T>(config: Config, fn: (stores: Stores, auth: ApiKeyAuthenticator) => Promise<T>): Promise<T> {
  const redis = createRedis(config.redis, { name: 'cli' });
  try {
    await redis.ping();
    const stores = await createStores({ redis, redisPrefix: config.redisPrefix, mongoUrl: config.mongoUrl, mongoDb: config.mongoDb, retentionSeconds: config.runRetentionSeconds, fairShareStep: config.fairShareStep });
    const gate = new RequestGate({ redis, keys: new RedisKeys(config.redisPrefix), perSecond: 0, burst: 1 });
    try {
      return await fn(stores, new ApiKeyAuthenticator({ apiKeys: stores.apiKeys, gate, cacheTtlMs: 0 }));
    } finally {
      await stores.close();
    }
  } finally {
    redis.disconnect();
  }
}

/** `switchyard accounts create --name N [--credits C]`: the account and its first API key. */
export async function createAccount(config: Config, name: string | undefined, creditsFlag: string | undefined) {
  if (!name) throw new UsageError('accounts create needs --name');
  const credits = creditsFlag === undefined ? 0 : Number(creditsFlag);
  if (!Number.isSafeInteger(credits) || credits < 0) throw new UsageError('--credits must be a whole number >= 0');
  return withStores(config, async (stores, auth) => {
    const account = await stores.accounts.create({ name, credits });
    const { key } = await auth.createKey(account.id, 'initial');
    return { account: { id: account.id, name: account.name, credits: account.credits }, api_key: key };
  });
}

/** `switchyard keys create --account ID [--name N]`: another API key for an account. */
export async function createKey(config: Config, accountId: string | undefined, name: string | undefined) {
  if (!accountId) throw new UsageError('keys create needs --account');
  return withStores(config, async (stores, auth) => {
    if (!(await stores.accounts.get(accountId))) throw new UsageError(`no account ${accountId}`);
    const { record, key } = await auth.createKey(accountId, name ?? null);
    return { id: record.id, key, prefix: record.prefix, created_at: record.created_at };
  });
}
