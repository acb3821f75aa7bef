import { monotonicFactory } from 'ulid';

const ulid = monotonicFactory();

/** Ids carry a ULID, so an account's bots list in creation order and conversations sort by time. */
export const newBotId = (): string => `bot_${ulid()}`;
export const newFlowId = (): string => `flow_${ulid()}`;
export const newConversationId = (): string => `conv_${ulid()}`;

export const BOT_ID_PATTERN = /^bot_[0-9A-HJKMNP-TV-Z]{26}$/;
export const CONVERSATION_ID_PATTERN = /^conv_[0-9A-HJKMNP-TV-Z]{26}$/;

/** A bot (docs/bots.md): a model, a system prompt and tools behind a publishable embed token. */
export interface BotRecord {
  id: string;
  account_id: string;
  name: string;
  model: string;
  systemPrompt: string;
  /** `custom:<id>` tool ids. */
  tools: string[];
  greeting: string;
  /** Normalized origins (`scheme://host[:port]`). */
  allowedOrigins: string[];
  /** Refuses the bare embed token; only session tokens minted by the owner's backend are accepted. */
  secure: boolean;
  /** Publishable, not a secret: accepted only from an allowed Origin. */
  embed_token: string;
  flow: { id: string; status: 'published'; version: number };
  created_at: string;
}

/** What a single-agent flow runs: read at every turn. */
export interface SingleAgentDefinition {
  type: 'single_agent';
  model: string;
  systemPrompt: string;
  tools: string[];
  maxSteps: number;
}

/** The flow backing a bot, published when the bot is created. */
export interface FlowRecord {
  id: string;
  account_id: string;
  bot_id: string;
  version: number;
  status: 'published';
  definition: SingleAgentDefinition;
  created_at: string;
}

/** A secure-mode session: only the sha256 of its token is stored. */
export interface BotSession {
  bot_id: string;
  expires_at: string;
}

/** One turn's text as the conversation keeps it (tool calls stay in the turn's `steps`). */
export interface ConversationMessage {
  role: 'user' | 'assistant';
  content: string;
  at: string;
}

export interface ConversationRecord {
  id: string;
  bot_id: string;
  created_at: string;
  /** Oldest first, at most the store's cap. */
  messages: ConversationMessage[];
}
