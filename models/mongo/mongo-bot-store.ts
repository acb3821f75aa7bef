import type { Collection } from 'mongodb';
import type { BotRecord, BotSession, FlowRecord } from '../bot-types.js';
import type { BotStore } from '../stores.js';

/** A bot as stored: the bot id is the `_id`. */
export type BotDoc = Omit<BotRecord, 'id'> & { _id: string };
/** A flow as stored: the flow id is the `_id`. */
export type FlowDoc = Omit<FlowRecord, 'id'> & { _id: string };
/** A session as stored: `_id` is the sha256 of its token; a TTL index on `expire_at` removes it. */
export type BotSessionDoc = BotSession & { _id: string; expire_at: Date };

/** Copies the record's own fields, so `_id` never leaks. */
const toBot = (d: BotDoc): BotRecord => ({
  id: d._id,
  account_id: d.account_id,
  name: d.name,
  model: d.model,
  systemPrompt: d.systemPrompt,
  tools: d.tools,
  greeting: d.greeting,
  allowedOrigins: d.allowedOrigins,
  secure: d.secure,
  embed_token: d.embed_token,
  flow: { id: d.flow.id, status: d.flow.status, version: d.flow.version },
  created_at: d.created_at,
});

const toFlow = (d: FlowDoc): FlowRecord => ({
  id: d._id,
  account_id: d.account_id,
  bot_id: d.bot_id,
  version: d.version,
  status: d.status,
  definition: d.definition,
  created_at: d.created_at,
});

export class MongoBotStore implements BotStore {
  constructor(
    private readonly bots: Collection<BotDoc>,
    private readonly flows: Collection<FlowDoc>,
    private readonly sessions: Collection<BotSessionDoc>,
  ) {}

  async create(bot: BotRecord, flow: FlowRecord): Promise<void> {
    // The flow first: a bot is never visible without the flow it names.
    const { id: flowId, ...flowFields } = flow;
    await this.flows.insertOne({ _id: flowId, ...flowFields });
    const { id, ...botFields } = bot;
    await this.bots.insertOne({ _id: id, ...botFields });
  }

  async get(id: string): Promise<BotRecord | null> {
    const doc = await this.bots.findOne({ _id: id });
    return doc ? toBot(doc) : null;
  }

  async list(accountId: string): Promise<BotRecord[]> {
    // Ids are ULIDs: _id order is creation order.
    return (await this.bots.find({ account_id: accountId }).sort({ _id: 1 }).toArray()).map(toBot);
  }

  async delete(accountId: string, id: string): Promise<BotRecord | null> {
    const doc = await this.bots.findOneAndDelete({ _id: id, account_id: accountId });
    if (!doc) return null;
    await this.flows.deleteOne({ _id: doc.flow.id });
    return toBot(doc);
  }

  async getFlow(id: string): Promise<FlowRecord | null> {
    const doc = await this.flows.findOne({ _id: id });
    return doc ? toFlow(doc) : null;
  }

  async createSession(tokenHash: string, session: BotSession): Promise<void> {
    await this.sessions.insertOne({ _id: tokenHash, bot_id: session.bot_id, expires_at: session.expires_at, expire_at: new Date(session.expires_at) });
  }

  async findSession(tokenHash: string): Promise<BotSession | null> {
    // The TTL monitor runs about once a minute; the filter refuses what it has not removed yet.
    const doc = await this.sessions.findOne({ _id: tokenHash, expire_at: { $gt: new Date() } });
    return doc ? { bot_id: doc.bot_id, expires_at: doc.expires_at } : null;
  }
}
