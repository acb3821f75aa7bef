import type { Redis } from 'ioredis';
import type { CreateToolResult, SampledSecret, StoredTool, ToolStore } from '../stores.js';
import type { RedisKeys } from './keys.js';
import { LuaScript } from './lua-script.js';

/**
 * Create checks the name and the count and writes both keys in one script, so concurrent
 * creates of one name get exactly one winner and an account never passes its limit.
 * KEYS: the account's name index, the tool. ARGV: name, id, account id, limit, doc.
 */
const CREATE = new LuaScript(`
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then return 'name_conflict' end
if redis.call('HLEN', KEYS[1]) >= tonumber(ARGV[4]) then return 'limit_reached' end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('HSET', KEYS[2], 'account_id', ARGV[3], 'name', ARGV[1], 'doc', ARGV[5])
return 'created'
`);

/**
 * Delete only the owner's tool, and free its name only if the index still points at this tool.
 * KEYS: the tool, the account's name index. ARGV: account id, tool id.
 */
const DELETE = new LuaScript(`
if redis.call('HGET', KEYS[1], 'account_id') ~= ARGV[1] then return false end
local fields = redis.call('HMGET', KEYS[1], 'name', 'doc')
redis.call('DEL', KEYS[1])
if redis.call('HGET', KEYS[2], fields[1]) == ARGV[2] then redis.call('HDEL', KEYS[2], fields[1]) end
return fields[2]
`);

export class RedisToolStore implements ToolStore {
  constructor(private readonly redis: Redis, private readonly keys: RedisKeys) {}

  async create(tool: StoredTool, maxPerAccount: number): Promise<CreateToolResult> {
    return CREATE.run<CreateToolResult>(
      this.redis,
      [this.keys.accountTools(tool.account_id), this.keys.tool(tool.id)],
      [tool.name, tool.id, tool.account_id, maxPerAccount, JSON.stringify(tool)],
    );
  }

  async get(accountId: string, id: string): Promise<StoredTool | null> {
    const [owner, doc] = await this.redis.hmget(this.keys.tool(id), 'account_id', 'doc');
    return owner === accountId && doc ? (JSON.parse(doc) as StoredTool) : null;
  }

  async list(accountId: string): Promise<StoredTool[]> {
    const ids = await this.redis.hvals(this.keys.accountTools(accountId));
    const pipeline = this.redis.pipeline();
    for (const id of ids) pipeline.hget(this.keys.tool(id), 'doc');
    const replies = (await pipeline.exec()) ?? [];
    return replies
      .map(([, doc]) => (typeof doc === 'string' ? (JSON.parse(doc) as StoredTool) : null))
      .filter((t): t is StoredTool => t !== null && t.account_id === accountId)
      .sort((a, b) => a.id.localeCompare(b.id));
  }

  async claimKeyCheck(sealed: string): Promise<string> {
    // SET NX GET (Redis 7): one round trip, and the first writer's value wins.
    const before = await this.redis.set(this.keys.toolKeyCheck(), sealed, 'NX', 'GET');
    return before ?? sealed;
  }

  async keyCheck(): Promise<string | null> {
    return this.redis.get(this.keys.toolKeyCheck());
  }

  async sampleSecret(): Promise<SampledSecret | null> {
    // A scan of the tool keys, but only on a store without a key check: once, at the first start.
    const match = this.keys.tool('*').replace(/[?[\]\\]|\*(?=.)/g, '\\$&');
    let cursor = '0';
    do {
      const [next, keys] = await this.redis.scan(cursor, 'MATCH', match, 'COUNT', 500);
      cursor = next;
      if (keys.length === 0) continue;
      const pipeline = this.redis.pipeline();
      for (const key of keys) pipeline.hget(key, 'doc');
      for (const [, doc] of (await pipeline.exec()) ?? []) {
        if (typeof doc !== 'string') continue;
        const tool = JSON.parse(doc) as StoredTool;
        for (const role of ['bearer_token', 'signing_secret'] as const) {
          const sealed = tool.secrets?.[role];
          if (sealed) return { toolId: tool.id, role, sealed };
        }
      }
    } while (cursor !== '0');
    return null;
  }

  async delete(accountId: string, id: string): Promise<StoredTool | null> {
    const doc = await DELETE.run<string | null>(this.redis, [this.keys.tool(id), this.keys.accountTools(accountId)], [accountId, id]);
    return doc ? (JSON.parse(doc) as StoredTool) : null;
  }
}
