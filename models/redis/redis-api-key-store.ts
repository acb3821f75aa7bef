import type { RedisClient } from '../redis-connection.js';
import type { ApiKeyStore } from '../stores.js';
import type { ApiKeyRecord } from '../types.js';
import type { RedisKeys } from './keys.js';
import { redisScripts } from './redis-scripts.js';

function decode(h: Record<string, string>): ApiKeyRecord | null {
  if (!h.id) return null;
  return {
    id: h.id,
    account_id: h.account_id,
    prefix: h.prefix,
    name: h.name ? h.name : null,
    hash: h.hash,
    created_at: h.created_at,
    revoked_at: h.revoked_at ? h.revoked_at : null,
    max_running: h.max_running ? Number(h.max_running) : null,
  };
}

export class RedisApiKeyStore implements ApiKeyStore {
  constructor(private readonly redis: RedisClient, private readonly keys: RedisKeys) {}

  async insert(record: ApiKeyRecord, lookupId: string): Promise<void> {
    const { revoked_at: _revoked, max_running, ...fields } = record;
    await this.redis
      .multi()
      .hset(this.keys.apiKey(lookupId), { ...fields, name: record.name ?? '', ...(max_running ? { max_running } : {}) })
      .sadd(this.keys.accountKeys(record.account_id), lookupId)
      .exec();
  }

  async findByLookupId(lookupId: string): Promise<ApiKeyRecord | null> {
    return decode(await this.redis.hgetall(this.keys.apiKey(lookupId)));
  }

  async list(accountId: string): Promise<ApiKeyRecord[]> {
    const ids = await this.redis.smembers(this.keys.accountKeys(accountId));
    const pipeline = this.redis.pipeline();
    for (const id of ids) pipeline.hgetall(this.keys.apiKey(id));
    const replies = (await pipeline.exec()) ?? [];
    return replies
      .map(([, h]) => decode(h as Record<string, string>))
      .filter((r): r is ApiKeyRecord => r !== null)
      .sort((a, b) => a.created_at.localeCompare(b.created_at) || a.id.localeCompare(b.id));
  }

  async setMaxRunning(accountId: string, id: string, max: number | null): Promise<ApiKeyRecord | null> {
    const lookupId = id.replace(/^key_/, '');
    if (!/^[a-z2-7]{16}$/.test(lookupId)) return null;
    const key = this.keys.apiKey(lookupId);
    const done = await redisScripts.run(this.redis, 'setKeyMaxRunning', [key], [accountId, max === null ? '' : String(max)]);
    return done ? decode(await this.redis.hgetall(key)) : null;
  }

  async revoke(accountId: string, id: string): Promise<ApiKeyRecord | null> {
    const lookupId = id.replace(/^key_/, '');
    if (!/^[a-z2-7]{16}$/.test(lookupId)) return null;
    const key = this.keys.apiKey(lookupId);
    const done = await redisScripts.run(this.redis, 'revokeApiKey', [key], [accountId, new Date().toISOString()]);
    return done ? decode(await this.redis.hgetall(key)) : null;
  }
}
