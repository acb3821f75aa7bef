import type { Redis } from 'ioredis';
import type { BotRecord, BotSession, FlowRecord } from '../bot-types.js';
import type { BotStore } from '../stores.js';
import type { RedisKeys } from './keys.js';
import { LuaScript } from './lua-script.js';

/**
 * Deletes a bot, its index entry and its flow, only if the bot is still the account's and still
 * names that flow: the caller read the flow id first, and a concurrent delete makes this a no-op.
 * KEYS: bot, account's bots, flow. ARGV: account id, bot id, flow id. Returns the bot's JSON or nil.
 */
const DELETE_BOT = new LuaScript(`
local h = redis.call('HMGET', KEYS[1], 'account_id', 'flow_id', 'doc')
if h[1] ~= ARGV[1] or h[2] ~= ARGV[3] then return false end
redis.call('DEL', KEYS[1], KEYS[3])
redis.call('ZREM', KEYS[2], ARGV[2])
return h[3]
`);

/**
 * Bots as hashes: `account_id` and `flow_id` for the delete script, the record as JSON (`doc`).
 * Flows and sessions are JSON strings; a session key expires with the session.
 */
export class RedisBotStore implements BotStore {
  constructor(private readonly redis: Redis, private readonly keys: RedisKeys) {}

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
    const doc = await DELETE_BOT.run<string | null>(this.redis, [this.keys.bot(id), this.keys.accountBots(accountId), this.keys.flow(flowId)], [accountId, id, flowId]);
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
