import type { RedisClient } from '../redis-connection.js';
import type { BotRecord, BotSession, FlowRecord } from '../bot-types.js';
import type { BotStore } from '../stores.js';
import type { RedisKeys } from './keys.js';
import { redisScripts } from './redis-scripts.js';

/**
 * Bots as hashes: `account_id` and `flow_id` for the deleteBot script, the record as JSON (`doc`).
 * Flows and sessions are JSON strings; a session key expires with the session.
 */
export class RedisBotStore implements BotStore {
  constructor(private readonly redis: RedisClient, private readonly keys: RedisKeys) {}

  async create(bot: BotRecord, flow: FlowRecord): Promise<void> {
    await this.redis
      .multi()
      .hset(this.keys.bot(bot.id), { account_id: bot.account_id, flow_id: flow.id, doc: JSON.stringify(bot) })
      .set(this.keys.flow(flow.id), JSON.stringify(flow))
      .zadd(this.keys.accountBots(bot.account_id), 0, bot.id)
      .exec();
  }

  async get(id: string): Promise<BotRecord | null> {
    const doc = await this.redis.hget(this.keys.bot(id), 'doc');
    return doc ? (JSON.parse(doc) as BotRecord) : null;
  }

  async list(accountId: string): Promise<BotRecord[]> {
    const ids = await this.redis.zrange(this.keys.accountBots(accountId), '-', '+', 'BYLEX');
    if (ids.length === 0) return [];
    const pipeline = this.redis.pipeline();
    for (const id of ids) pipeline.hget(this.keys.bot(id), 'doc');
    const docs = (await pipeline.exec()) ?? [];
    // A bot deleted between the two reads is simply left out.
    return docs.flatMap(([, doc]) => (typeof doc === 'string' ? [JSON.parse(doc) as BotRecord] : []));
  }

  async delete(accountId: string, id: string): Promise<BotRecord | null> {
    const flowId = await this.redis.hget(this.keys.bot(id), 'flow_id');
    if (!flowId) return null;
    const doc = await redisScripts.run(this.redis, 'deleteBot', [this.keys.bot(id), this.keys.accountBots(accountId), this.keys.flow(flowId)], [accountId, id, flowId]);
    return doc ? (JSON.parse(doc) as BotRecord) : null;
  }

  async getFlow(id: string): Promise<FlowRecord | null> {
    const doc = await this.redis.get(this.keys.flow(id));
    return doc ? (JSON.parse(doc) as FlowRecord) : null;
  }

  async createSession(tokenHash: string, session: BotSession): Promise<void> {
    const ttlMs = Math.max(1, Date.parse(session.expires_at) - Date.now());
    await this.redis.set(this.keys.botSession(tokenHash), JSON.stringify(session), 'PX', ttlMs);
  }

  async findSession(tokenHash: string): Promise<BotSession | null> {
    const raw = await this.redis.get(this.keys.botSession(tokenHash));
    if (!raw) return null;
    const session = JSON.parse(raw) as BotSession;
    // The key's TTL removes it; the stored time is the authority in the meantime.
    return Date.parse(session.expires_at) > Date.now() ? session : null;
  }
}
