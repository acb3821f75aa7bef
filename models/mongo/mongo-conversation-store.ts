import type { Collection } from 'mongodb';
import type { ConversationMessage, ConversationRecord } from '../bot-types.js';
import type { ConversationStore } from '../stores.js';

/** A conversation as stored: `_id` is its id; a TTL index on `expire_at` removes it. */
export interface ConversationDoc {
  _id: string;
  bot_id: string;
  created_at: string;
  messages: ConversationMessage[];
  expire_at: Date;
}

const lifetime = (ttlSeconds: number) => new Date(Date.now() + ttlSeconds * 1000);

export class MongoConversationStore implements ConversationStore {
  constructor(private readonly conversations: Collection<ConversationDoc>) {}

  async create(conversation: Omit<ConversationRecord, 'messages'>, ttlSeconds: number): Promise<void> {
    await this.conversations.insertOne({ _id: conversation.id, bot_id: conversation.bot_id, created_at: conversation.created_at, messages: [], expire_at: lifetime(ttlSeconds) });
  }

  async get(id: string): Promise<ConversationRecord | null> {
    const doc = await this.conversations.findOne({ _id: id, expire_at: { $gt: new Date() } });
    return doc ? { id: doc._id, bot_id: doc.bot_id, created_at: doc.created_at, messages: doc.messages.map((m) => ({ role: m.role, content: m.content, at: m.at })) } : null;
  }

  async append(id: string, messages: ConversationMessage[], keep: number, ttlSeconds: number): Promise<boolean> {
    // One update: push and trim ($slice) together, so the cap holds under concurrent turns.
    const res = await this.conversations.updateOne(
      { _id: id, expire_at: { $gt: new Date() } },
      { $push: { messages: { $each: messages, $slice: -keep } }, $set: { expire_at: lifetime(ttlSeconds) } },
    );
    return res.matchedCount === 1;
  }
}
