import { randomBytes } from 'node:crypto';
import { NotFoundError, ApiError, UnauthorizedError, ValidationError } from '../../../models/errors.js';
import { hashSecret, sameHash } from '../../../models/credentials.js';
import { BOT_ID_PATTERN, newBotId, newFlowId, type BotRecord, type FlowRecord } from '../../../models/bot-types.js';
import type { BotStore } from '../../../models/stores.js';
import { LLM_KIND, type LlmRunner } from '../llm/llm-runner.js';
import type { ApiKeyAuthenticator } from '../auth/api-key-authenticator.js';
import { waitSeconds, type RequestGate } from '../auth/request-gate.js';
import type { Config } from '../../main/config.js';
import type { ToolService } from '../tools/tool-service.js';
import { EMBED_TOKEN_PREFIX, SESSION_TOKEN_PREFIX, type BotCredentials } from './bot-credentials.js';
import { originOf } from './bot-origins.js';
import type { Bot } from '../../../sdk/client/types.js';

export type { BotRecord } from '../../../models/bot-types.js';

/** The body of `POST /v1/bots`, once it passed its JSON Schema. */
export interface CreateBotInput {
  name: string;
  model: string;
  systemPrompt?: string;
  tools?: string[];
  greeting?: string;
  allowedOrigins?: string[];
  secure?: boolean;
}

export interface BotServiceOptions {
  store: BotStore;
  auth: ApiKeyAuthenticator;
  gate: RequestGate;
  tools: Pick<ToolService, 'resolve'>;
  /** Read at each use: with PORT=0 the URL is settled only once the server listens. */
  publicUrl: () => string;
  config: Pick<Config, 'agents'>;
  /** Whether the bot's model is one of the llm catalogue's (docs/models.md). */
  models: Pick<LlmRunner, 'availability'>;
}

/**
 * Bots (docs/bots.md): creation with their published single-agent flow, the owner's CRUD, and
 * the gate of the bot surfaces (invoke, WebSocket, chat page): embed token from an allowed
 * Origin, secure-mode session tokens, or the owner's account key.
 */
export class BotService {
  constructor(private readonly opts: BotServiceOptions) {}

  /**
   * Creates the bot and publishes its flow. Throws 400 `unknown_tool` for a tool the account
   * does not have, and `unknown_model` for a model the llm catalogue does not know (a known
   * model no worker serves yet is accepted: its turns wait for one).
   */
  async create(accountId: string, input: CreateBotInput): Promise<BotRecord> {
    const allowedOrigins = normalizeOrigins(input.allowedOrigins ?? []);
    const tools = input.tools ?? [];
    await this.opts.tools.resolve(accountId, tools);
    if ((await this.opts.models.availability(input.model)) === 'unknown') {
      throw new ApiError('unknown_model', `${LLM_KIND} has no model ${JSON.stringify(input.model)}: name one of GET /v1/models (or default)`, { details: { path: '/model', kind: LLM_KIND, model: input.model } });
    }
    const now = new Date().toISOString();
    const id = newBotId();
    const flow: FlowRecord = {
      id: newFlowId(),
      account_id: accountId,
      bot_id: id,
      version: 1,
      status: 'published',
      definition: { type: 'single_agent', model: input.model, systemPrompt: input.systemPrompt ?? '', tools, maxSteps: this.opts.config.agents.maxSteps },
      created_at: now,
    };
    const bot: BotRecord = {
      id,
      account_id: accountId,
      name: input.name,
      model: input.model,
      systemPrompt: input.systemPrompt ?? '',
      tools,
      greeting: input.greeting ?? '',
      allowedOrigins,
      secure: input.secure ?? false,
      embed_token: `${EMBED_TOKEN_PREFIX}${randomBytes(24).toString('base64url')}`,
      flow: { id: flow.id, status: flow.status, version: flow.version },
      created_at: now,
    };
    await this.opts.store.create(bot, flow);
    return bot;
  }

  async get(botId: string): Promise<BotRecord | null> {
    return BOT_ID_PATTERN.test(botId) ? this.opts.store.get(botId) : null;
  }

  /** The account's bot; another account's is not found (404), like a missing one. */
  async getOwned(accountId: string, botId: string): Promise<BotRecord> {
    const bot = await this.get(botId);
    if (!bot || bot.account_id !== accountId) throw new NotFoundError('bot');
    return bot;
  }

  list(accountId: string): Promise<BotRecord[]> {
    return this.opts.store.list(accountId);
  }

  /** Deletes the account's bot: its tokens, sessions and conversations stop working at once. */
  async delete(accountId: string, botId: string): Promise<BotRecord> {
    const removed = BOT_ID_PATTERN.test(botId) ? await this.opts.store.delete(accountId, botId) : null;
    if (!removed) throw new NotFoundError('bot');
    return removed;
  }

  /** The flow the bot runs; a bot without one is broken (500), which creation makes impossible. */
  async flow(bot: BotRecord): Promise<FlowRecord> {
    const flow = await this.opts.store.getFlow(bot.flow.id);
    if (!flow) throw new ApiError('internal', `bot ${bot.id} has no flow`);
    return flow;
  }

  /** Mints a secure-mode session token (the owner's backend calls this with its account key). */
  async createSession(bot: BotRecord): Promise<{ token: string; expires_at: string }> {
    const token = `${SESSION_TOKEN_PREFIX}${randomBytes(32).toString('base64url')}`;
    const expires_at = new Date(Date.now() + this.opts.config.agents.botSessionTtlSeconds * 1000).toISOString();
    await this.opts.store.createSession(hashSecret(token), { bot_id: bot.id, expires_at });
    return { token, expires_at };
  }

  /**
   * Bot surfaces' gate: token = embed or session token (accepted only from an allowed Origin) or
   * accountKey = the owner's key (no Origin check). Throws 401 unauthorized (bad or missing
   * token, the embed token of a secure bot), 403 forbidden (Origin missing or not allowed),
   * 404 not_found (another account's key), 429 (the key's rate limit).
   */
  async authorize(bot: BotRecord, creds: BotCredentials): Promise<void> {
    if (creds.accountKey) return this.authorizeOwner(bot, creds.accountKey);
    const token = creds.token;
    if (!token) throw new UnauthorizedError("a bot token is required: ?token=<embed token> or Authorization: Bearer <embed token | session token | the owner's API key>");
    if (token.startsWith(SESSION_TOKEN_PREFIX)) {
      const session = await this.opts.store.findSession(hashSecret(token));
      if (!session || session.bot_id !== bot.id) throw new UnauthorizedError('the session token is not valid for this bot or has expired');
    } else if (!sameHash(hashSecret(token), hashSecret(bot.embed_token))) {
      throw new UnauthorizedError('the token is not valid for this bot');
    } else if (bot.secure) {
      throw new UnauthorizedError("this bot is in secure mode: it takes session tokens that its owner's backend mints (POST /v1/bots/{id}/sessions), not the embed token");
    }
    this.checkOrigin(bot, creds.origin);
  }

  /** Allowed frame-ancestors / CORS origins: allowedOrigins and, always, the gateway's own origin (its chat page runs there). */
  allowedOrigins(bot: BotRecord): string[] {
    return [...new Set([...bot.allowedOrigins, new URL(this.opts.publicUrl()).origin])];
  }

  /** Whether a request's `Origin` header names an allowed origin of the bot. */
  isAllowedOrigin(bot: BotRecord, origin: string | undefined): boolean {
    const normalized = originOf(origin);
    return normalized !== null && this.allowedOrigins(bot).includes(normalized);
  }

  /** The bot object of the API: the record's fields and the absolute URLs of its surfaces. */
  view(bot: BotRecord): Bot {
    const base = this.opts.publicUrl();
    // A secure bot's URLs carry no token: the embed token would be refused; add a session token.
    const query = bot.secure ? '' : `?token=${encodeURIComponent(bot.embed_token)}`;
    const path = `/v1/bots/${bot.id}`;
    return {
      id: bot.id,
      name: bot.name,
      model: bot.model,
      systemPrompt: bot.systemPrompt,
      tools: bot.tools,
      greeting: bot.greeting,
      allowedOrigins: bot.allowedOrigins,
      secure: bot.secure,
      embedToken: bot.embed_token,
      chatUrl: `${base}${path}/chat${query}`,
      invokeUrl: `${base}${path}/invoke`,
      wsUrl: `${base.replace(/^http/, 'ws')}${path}/ws${query}`,
      flow: bot.flow,
      created_at: bot.created_at,
    };
  }

  private async authorizeOwner(bot: BotRecord, key: string): Promise<void> {
    const principal = await this.opts.auth.identify(key);
    const verdict = await this.opts.gate.admit(principal);
    if (verdict.outcome === 'revoked') throw new UnauthorizedError('the API key has been revoked');
    if (verdict.outcome === 'limited') {
      const seconds = waitSeconds(verdict.retryAfterMs);
      throw new ApiError('rate_limited', `too many requests for this API key; retry in ${seconds} s`, {
        headers: { 'Retry-After': String(seconds), ...this.opts.gate.fields(verdict) },
        details: { retry_after_ms: verdict.retryAfterMs },
      });
    }
    // Another account's bot does not exist for this key (docs/api.md: 404, never 403).
    if (principal.accountId !== bot.account_id) throw new NotFoundError('bot');
  }

  private checkOrigin(bot: BotRecord, origin: string | undefined): void {
    if (!origin) {
      throw new ApiError('forbidden', "bot tokens are accepted only from a browser page on one of the bot's allowedOrigins (an Origin header); server-to-server calls use the owner's API key");
    }
    if (!this.isAllowedOrigin(bot, origin)) {
      throw new ApiError('forbidden', `the origin ${JSON.stringify(origin)} is not among this bot's allowedOrigins`, { details: { origin } });
    }
  }
}

/** allowedOrigins as origins (`scheme://host[:port]`), deduplicated; 400 naming each entry that is not one. */
function normalizeOrigins(values: string[]): string[] {
  const errors = values.flatMap((v, i) =>
    originOf(v) ? [] : [{ path: `/allowedOrigins/${i}`, message: 'must be an origin: http(s)://host[:port], no path, query or credentials', keyword: 'format', params: { format: 'origin' } }],
  );
  if (errors.length) throw new ValidationError(`request body is invalid: ${errors[0].path} ${errors[0].message}`, errors);
  return [...new Set(values.map((v) => originOf(v)!))];
}
