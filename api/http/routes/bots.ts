import { NotFoundError, ApiError } from '../../../models/errors.js';
import { botCredentials } from '../../services/bots/bot-credentials.js';
import * as B from '../../contract/bot-schemas.js';
import type { BotRecord, BotService, CreateBotInput } from '../../services/bots/bot-service.js';
import type { BotMessage, BotTurns } from '../../services/bots/bot-turns.js';
import type { Ctx } from '../context.js';
import type { RouteSpec } from '../route-spec.js';

const tokenQuery = {
  type: 'object',
  properties: { token: { type: 'string', maxLength: 512, description: 'The embed token or a session token (or send it as Authorization: Bearer)' } },
} as const;

const surfaceHeaders = [
  { name: 'Origin', description: "Set by browsers; bot tokens are accepted only from the bot's allowedOrigins", schema: { type: 'string' } },
  { name: 'Authorization', description: "Bearer <embed token | session token | the owner's API key>", schema: { type: 'string' } },
];

/** The bot of a bot surface (any account's: the surface's own credentials decide). */
async function surfaceBot(bots: BotService, ctx: Ctx): Promise<BotRecord> {
  const bot = await bots.get(ctx.params.bot_id);
  if (!bot) throw new NotFoundError('bot');
  return bot;
}

/**
 * CORS for the bot's allowed origins only: browsers elsewhere cannot read the answer. Set before
 * anything can fail, so a browser on an allowed page can read the error too.
 */
function allowOrigin(ctx: Ctx, bots: BotService, bot: BotRecord): boolean {
  ctx.vary('Origin');
  const origin = ctx.get('Origin');
  if (!bots.isAllowedOrigin(bot, origin)) return false;
  ctx.set('Access-Control-Allow-Origin', origin);
  ctx.set('Access-Control-Expose-Headers', 'Retry-After, X-Request-Id');
  return true;
}

/** Aborts when the caller hangs up before its answer: the turn stops paying for LLM steps. */
function hangUp(ctx: Ctx): AbortSignal {
  const gone = new AbortController();
  ctx.res.once('close', () => ctx.res.writableFinished || gone.abort());
  return gone.signal;
}

/** `/v1/bots/{bot_id}` for its owner: the bot that `act` reads or removes, 404 for anyone else. */
function ownedBotRoute(
  bots: BotService,
  method: 'get' | 'delete',
  operationId: string,
  summary: string,
  description: string,
  act: (accountId: string, botId: string) => Promise<BotRecord>,
): RouteSpec {
  return {
    method,
    path: '/v1/bots/{bot_id}',
    operationId,
    summary,
    tag: 'bots',
    auth: 'account',
    responses: { 200: { description, schema: B.bot }, 404: { description: 'No such bot for this account' } },
    async handler(ctx) {
      ctx.body = bots.view(await act(ctx.state.principal!.accountId, ctx.params.bot_id));
    },
  };
}

export interface BotRoutesOptions {
  bots: BotService;
  /** Turns of `invokeUrl`: the agent loop over a conversation. */
  botTurns: BotTurns;
}

/** Bots (docs/bots.md): the owner's CRUD and sessions, and `invokeUrl` for embed tokens. */
export function botRoutes({ bots, botTurns }: BotRoutesOptions): RouteSpec[] {
  return [
    {
      method: 'post',
      path: '/v1/bots',
      operationId: 'createBot',
      summary: 'Create a bot; its single-agent flow is created and published with it',
      tag: 'bots',
      auth: 'account',
      body: B.createBotBody,
      responses: {
        201: { description: 'The bot, with its embed token and surface URLs', schema: B.bot, headers: { Location: 'The bot' } },
        400: { description: 'invalid_request (e.g. an allowedOrigins entry that is not an origin), unknown_tool (a tool id this account does not have)' },
      },
      async handler(ctx) {
        const bot = await bots.create(ctx.state.principal!.accountId, ctx.state.body as CreateBotInput);
        ctx.status = 201;
        ctx.set('Location', `/v1/bots/${bot.id}`);
        ctx.body = bots.view(bot);
      },
    },
    {
      method: 'get',
      path: '/v1/bots',
      operationId: 'listBots',
      summary: "The account's bots, oldest first",
      tag: 'bots',
      auth: 'account',
      responses: { 200: { description: 'Bots', schema: B.botList } },
      async handler(ctx) {
        ctx.body = { data: (await bots.list(ctx.state.principal!.accountId)).map((b) => bots.view(b)) };
      },
    },
    ownedBotRoute(bots, 'get', 'getBot', 'A bot of the account', 'The bot', (accountId, id) => bots.getOwned(accountId, id)),
    ownedBotRoute(bots, 'delete', 'deleteBot', 'Delete a bot: its tokens, sessions and conversations stop working at once', 'The deleted bot', (accountId, id) =>
      bots.delete(accountId, id),
    ),
    {
      method: 'post',
      path: '/v1/bots/{bot_id}/sessions',
      operationId: 'createBotSession',
      summary: "Mint a short-lived session token for one of the account's bots (secure mode: the owner's backend calls this)",
      tag: 'bots',
      auth: 'account',
      responses: { 201: { description: 'The session token, accepted until expires_at (BOT_SESSION_TTL_S)', schema: B.botSession }, 404: { description: 'No such bot for this account' } },
      async handler(ctx) {
        const bot = await bots.getOwned(ctx.state.principal!.accountId, ctx.params.bot_id);
        ctx.status = 201;
        ctx.body = await bots.createSession(bot);
      },
    },
    {
      method: 'post',
      path: '/v1/bots/{bot_id}/invoke',
      operationId: 'invokeBot',
      summary: "Send the bot a message (`invokeUrl`); the bot's owner pays for its LLM steps",
      tag: 'bots',
      auth: 'none',
      query: tokenQuery,
      headers: surfaceHeaders,
      body: B.invokeBody,
      responses: {
        200: { description: 'The reply and the tool calls made for it', schema: B.invokeReply, headers: { 'Access-Control-Allow-Origin': 'The Origin, when it is allowed' } },
        401: { description: 'Missing or invalid token; the embed token of a secure bot', headers: { 'WWW-Authenticate': 'Bearer' } },
        402: { description: "The bot owner's balance is short of an LLM step" },
        403: { description: 'A bot token without an Origin, or from an Origin not in allowedOrigins' },
        404: { description: 'No such bot; no such conversation for this bot' },
        422: { description: '`max_steps`: AGENT_MAX_STEPS LLM steps without an answer (`details.steps` lists the tool calls)' },
        429: { description: 'The per-bot or per-client-address rate limit; see Retry-After', headers: { 'Retry-After': 'Seconds to wait' } },
        503: { description: 'No llm worker is connected, or an LLM step failed or timed out' },
      },
      // CORS first: a browser on an allowed page can then read a 400 about its body too.
      async prepare(ctx) {
        allowOrigin(ctx, bots, await surfaceBot(bots, ctx));
      },
      async handler(ctx) {
        const bot = await surfaceBot(bots, ctx);
        await bots.authorize(bot, botCredentials(ctx.headers, ctx.query.token));
        ctx.body = await botTurns.run(bot, ctx.state.body as BotMessage, ctx.ip, { signal: hangUp(ctx) });
      },
    },
    {
      method: 'options',
      path: '/v1/bots/{bot_id}/invoke',
      operationId: 'invokeBotPreflight',
      summary: "CORS preflight of invokeUrl: allowed only for the bot's allowedOrigins (and the gateway's own)",
      tag: 'bots',
      auth: 'none',
      headers: [{ name: 'Origin', description: 'The page asking', schema: { type: 'string' } }],
      responses: {
        204: { description: 'Allowed: Access-Control-Allow-Origin echoes the Origin', mediaType: 'none' },
        403: { description: 'The Origin is not allowed' },
        404: { description: 'No such bot' },
      },
      async handler(ctx) {
        const bot = await surfaceBot(bots, ctx);
        if (!allowOrigin(ctx, bots, bot)) {
          throw new ApiError('forbidden', `the origin ${JSON.stringify(ctx.get('Origin'))} is not among this bot's allowedOrigins`);
        }
        ctx.set('Access-Control-Allow-Methods', 'POST, OPTIONS');
        ctx.set('Access-Control-Allow-Headers', 'Authorization, Content-Type, X-Request-Id');
        ctx.set('Access-Control-Max-Age', '600');
        ctx.status = 204;
      },
    },
  ];
}
