import { randomBytes } from 'node:crypto';
import { NotFoundError } from '../../../models/errors.js';
import { embedEtag, embedScript } from '../bot-pages/assets.js';
import { chatPageCsp, chatPageHtml } from '../bot-pages/chat-page.js';
import { botCredentials } from '../../services/bots/bot-credentials.js';
import type { RouteSpec } from '../route-spec.js';
import type { BotService } from '../../services/bots/bot-service.js';

/**
 * The bot surfaces people see: the chat page behind `chatUrl` and the embeddable widget script
 * (docs/bots-embed.md). Both talk to the bot WebSocket (`/v1/bots/{id}/ws`) that the bots
 * routes serve; these only render.
 */

/** The bot socket's URL under PUBLIC_URL (http -> ws, https -> wss; a path prefix is kept). */
function socketUrl(publicUrl: string, botId: string, token: string): URL {
  const url = new URL(`${publicUrl}/v1/bots/${encodeURIComponent(botId)}/ws`);
  url.protocol = url.protocol === 'https:' ? 'wss:' : 'ws:';
  url.searchParams.set('token', token);
  return url;
}

export interface BotPageRoutesOptions {
  bots: BotService;
  /** The base of the page's socket URL; with PORT=0 it is settled once the server listens. */
  publicUrl: () => string;
}

export function botPageRoutes({ bots, publicUrl }: BotPageRoutesOptions): RouteSpec[] {
  return [
    {
      method: 'get',
      path: '/v1/bots/{bot_id}/chat',
      operationId: 'getBotChatPage',
      summary: "The bot's chat page (HTML): `chatUrl`, with the embed token in `token`",
      tag: 'bots',
      auth: 'none',
      query: { type: 'object', properties: { token: { type: 'string', maxLength: 512, description: "The bot's embed token, or a secure bot's session token (the owner's account key in Authorization works too)" } } },
      responses: {
        200: {
          description: 'The chat page; it may be framed only by the gateway and the bot\'s allowedOrigins (CSP frame-ancestors)',
          mediaType: 'text/html',
          schema: { type: 'string' },
          headers: { 'Content-Security-Policy': "default-src 'none', nonce'd script and style, connect-src the gateway's WebSocket origin, frame-ancestors 'self' and allowedOrigins" },
        },
        401: { description: 'Missing or wrong embed token', headers: { 'WWW-Authenticate': 'Bearer' } },
        404: { description: 'No such bot' },
      },
      async handler(ctx) {
        const bot = await bots.get(ctx.params.bot_id);
        if (!bot) throw new NotFoundError('bot');
        const creds = botCredentials(ctx.headers, ctx.query.token);
        const base = publicUrl();
        // The page is the gateway's own: a navigation carries no Origin worth checking, and who
        // may frame the page is the browser's to enforce, by frame-ancestors.
        await bots.authorize(bot, { ...creds, origin: new URL(base).origin });

        const nonce = randomBytes(16).toString('base64');
        // The socket takes the token that opened the page (a secure bot's session token). A page
        // opened with the owner's account key uses the publishable embed token, or for a secure
        // bot (which refuses that) a session token minted here: the key never reaches the page.
        const token = creds.token ?? (bot.secure ? (await bots.createSession(bot)).token : bot.embed_token);
        const ws = socketUrl(base, bot.id, token);
        ctx.set('Content-Security-Policy', chatPageCsp({ nonce, wsOrigin: `${ws.protocol}//${ws.host}`, frameAncestors: bots.allowedOrigins(bot) }));
        // The URL carries the token: it must not travel on in a Referer.
        ctx.set('Referrer-Policy', 'no-referrer');
        ctx.type = 'text/html; charset=utf-8';
        ctx.body = chatPageHtml({ nonce, botName: bot.name, wsUrl: ws.href });
      },
    },
    {
      method: 'get',
      path: '/embed.js',
      operationId: 'getEmbedScript',
      summary: 'The embeddable chat widget: <script src="{PUBLIC_URL}/embed.js" data-bot="<bot id>" data-token="<embed token>">',
      tag: 'bots',
      auth: 'none',
      headers: [{ name: 'If-None-Match', description: 'The ETag you hold: 304 when it matches', schema: { type: 'string' } }],
      responses: {
        200: { description: 'The widget script (no credential)', mediaType: 'text/javascript', schema: { type: 'string' }, headers: { ETag: 'Changes with the script', 'Cache-Control': 'public, max-age=300' } },
        304: { description: 'Not modified', mediaType: 'none', headers: { ETag: 'Changes with the script' } },
      },
      async handler(ctx) {
        ctx.set('ETag', embedEtag);
        // Short-lived cache: a fixed widget reaches pages within minutes, revalidated by ETag.
        ctx.set('Cache-Control', 'public, max-age=300');
        // Loaded by any page, including those isolated with COEP.
        ctx.set('Cross-Origin-Resource-Policy', 'cross-origin');
        if (ctx.get('If-None-Match').split(',').some((t) => t.trim().replace(/^W\//, '') === embedEtag)) {
          ctx.status = 304;
          return;
        }
        ctx.type = 'text/javascript; charset=utf-8';
        ctx.body = embedScript;
      },
    },
  ];
}
