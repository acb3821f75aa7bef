import { NotFoundError, ApiError } from '../../../models/errors.js';
import { CONVERSATION_ID_PATTERN, newConversationId, type BotRecord } from '../../../models/bot-types.js';
import type { ConversationStore } from '../../../models/stores.js';
import type { AgentHooks, AgentLoop, AgentStep } from './agent-loop.js';
import type { LlmRunner } from '../llm/llm-runner.js';
import type { BotRateLimiter } from './bot-rate-limiter.js';
import type { BotService } from './bot-service.js';

/** Messages a conversation keeps (the oldest go first); what the LLM sees of earlier turns. */
export const CONVERSATION_MAX_MESSAGES = 50;
/** A conversation lives this long after its last message. */
export const CONVERSATION_TTL_SECONDS = 30 * 86400;

/** A message to a bot: the body of `invokeUrl`, a `message` frame on `wsUrl`. */
export interface BotMessage {
  message: string;
  conversation_id?: string;
}

export interface BotReply {
  conversation_id: string;
  reply: string;
  steps: AgentStep[];
}

export interface BotTurnHooks extends AgentHooks {
  /** A new conversation was started for this message (before any step). */
  onConversation?: (conversationId: string) => void;
}

export interface BotTurnsOptions {
  bots: Pick<BotService, 'flow'>;
  conversations: ConversationStore;
  loop: AgentLoop;
  llm: Pick<LlmRunner, 'assertAvailable'>;
  limiter: BotRateLimiter;
}

/**
 * One turn of a bot conversation, the same for invoke and the bot socket: rate limits, the
 * conversation (new or continued, this bot's only), the agent loop on the bot's published flow,
 * paid by the bot's owner, then the user message and the reply appended to the conversation.
 */
export class BotTurns {
  constructor(private readonly opts: BotTurnsOptions) {}

  /** `client` is the caller's address (per-client rate limit). The bot must be authorized already. */
  async run(bot: BotRecord, msg: BotMessage, client: string, hooks: BotTurnHooks = {}): Promise<BotReply> {
    await this.opts.limiter.admit(bot.id, client);
    const existing = msg.conversation_id === undefined ? null : await this.conversation(bot, msg.conversation_id);
    // Before anything is written: with no llm worker the answer is 503 at once, not a queued job.
    await this.opts.llm.assertAvailable();
    const flow = await this.opts.bots.flow(bot);
    let conversationId = existing?.id;
    if (!conversationId) {
      conversationId = newConversationId();
      await this.opts.conversations.create({ id: conversationId, bot_id: bot.id, created_at: new Date().toISOString() }, CONVERSATION_TTL_SECONDS);
      hooks.onConversation?.(conversationId);
    }
    const asked = new Date().toISOString();
    const { reply, steps } = await this.opts.loop.run({ accountId: bot.account_id, definition: flow.definition, history: existing?.messages ?? [], message: msg.message }, hooks);
    // A failed turn leaves the conversation as it was: the user can send the message again.
    const kept = await this.opts.conversations.append(
      conversationId,
      [
        { role: 'user', content: msg.message, at: asked },
        { role: 'assistant', content: reply, at: new Date().toISOString() },
      ],
      CONVERSATION_MAX_MESSAGES,
      CONVERSATION_TTL_SECONDS,
    );
    if (!kept) throw new NotFoundError('conversation');
    return { conversation_id: conversationId, reply, steps };
  }

  /** This bot's conversation; another bot's, an expired or a malformed id is not found. */
  private async conversation(bot: BotRecord, id: string) {
    const conversation = CONVERSATION_ID_PATTERN.test(id) ? await this.opts.conversations.get(id) : null;
    if (!conversation || conversation.bot_id !== bot.id) throw new ApiError('not_found', 'conversation not found for this bot', { details: { conversation_id: id } });
    return conversation;
  }
}
