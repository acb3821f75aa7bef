import { primariesOf, type RedisClient } from '../redis-connection.js';
import type { CreateToolResult, SampledSecret, StoredTool, ToolStore } from '../stores.js';
import type { RedisKeys } from './keys.js';
import { redisScripts } from './redis-scripts.js';

export class RedisToolStore implements ToolStore {
  constructor(private readonly redis: RedisClient, private readonly keys: RedisKeys) {}

  async create(tool: StoredTool, maxPerAccount: number): Promise<CreateToolResult> {
    return redisScripts.run(
      this.redis,
      'createTool',
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
    // SCAN sees one node's keys: on a cluster, each primary's in turn.
    for (const node of await primariesOf(this.redis)) {
      let cursor = '0';
      do {
        const [next, keys] = await node.scan(cursor, 'MATCH', match, 'COUNT', 500);
        cursor = next;
        if (keys.length === 0) continue;
        const pipeline = node.pipeline();
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
    }
    return null;
  }

  async delete(accountId: string, id: string): Promise<StoredTool | null> {
    const doc = await redisScripts.run(this.redis, 'deleteTool', [this.keys.tool(id), this.keys.accountTools(accountId)], [accountId, id]);
    return doc ? (JSON.parse(doc) as StoredTool) : null;
  }
}
