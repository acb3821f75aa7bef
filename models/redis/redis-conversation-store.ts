import type { RedisClient } from '../redis-connection.js';
import type { ConversationMessage, ConversationRecord } from '../bot-types.js';
import type { ConversationStore } from '../stores.js';
import type { RedisKeys } from './keys.js';
import { redisScripts } from './redis-scripts.js';

export class RedisConversationStore implements ConversationStore {
  constructor(private readonly redis: RedisClient, private readonly keys: RedisKeys) {}

  async create(conversation: Omit<ConversationRecord, 'messages'>, ttlSeconds: number): Promise<void> {
    const key = this.keys.conversation(conversation.id);
    await this.redis.multi().hset(key, { bot_id: conversation.bot_id, created_at: conversation.created_at }).expire(key, ttlSeconds).exec();
  }

  async get(id: string): Promise<ConversationRecord | null> {
    const [[, head], [, messages]] = (await this.redis.multi().hgetall(this.keys.conversation(id)).lrange(this.keys.conversationMessages(id), 0, -1).exec()) as [
      [unknown, Record<string, string>],
      [unknown, string[]],
    ];
    if (!head.bot_id) return null;
    return { id, bot_id: head.bot_id, created_at: head.created_at, messages: messages.map((m) => JSON.parse(m) as ConversationMessage) };
  }

  async append(id: string, messages: ConversationMessage[], keep: number, ttlSeconds: number): Promise<boolean> {
    if (messages.length === 0) return (await this.redis.exists(this.keys.conversation(id))) === 1;
    const done = await redisScripts.run(
      this.redis,
      'appendConversation',
      [this.keys.conversation(id), this.keys.conversationMessages(id)],
      [keep, ttlSeconds, ...messages.map((m) => JSON.stringify(m))],
    );
    return done === 1;
  }
}
