import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import type { Logger } from 'pino';
import { WebSocketServer, type RawData, type WebSocket } from 'ws';
import { errorFrame, isUnexpected, refuseUpgrade } from './socket-errors.js';
import type { BotRecord } from '../../models/bot-types.js';
import { NotFoundError, ApiError, toApiError } from '../../models/errors.js';
import { jsonDepth, parseJsonObject } from '../http/middleware/json-body.js';
import { assertValid } from '../../models/validation.js';
import { botCredentials, type BotCredentials } from '../services/bots/bot-credentials.js';
import * as B from '../contract/bot-schemas.js';
import type { BotService } from '../services/bots/bot-service.js';
import type { BotTurns } from '../services/bots/bot-turns.js';

/** `wsUrl`: `/v1/bots/{id}/ws`. */
const BOT_WS_PATH = /^\/v1\/bots\/([^/]+)\/ws$/;

/** Messages a socket may have unanswered at once (the one under way included); more are refused, not held in memory. */
const MAX_WAITING = 4;

/** Close codes beyond RFC 6455's, when the credentials stop being good (an expired session, a deleted bot). */
const CLOSE_FOR: Partial<Record<string, number>> = { unauthorized: 4401, forbidden: 4403, not_found: 4404 };

export interface BotSocketServerOptions {
  bots: BotService;
  turns: BotTurns;
  log: Logger;
  /** TRUST_PROXY: the client address is the first of X-Forwarded-For, as Koa's `ctx.ip`. */
  trustProxy: boolean;
  /** Largest message, as for JSON bodies. */
  maxMessageBytes: number;
  maxDepth: number;
}

interface Session {
  ws: WebSocket;
  bot: BotRecord;
  creds: BotCredentials;
  client: string;
  /** Messages are answered one after another, in the order they came. */
  queue: Promise<void>;
  waiting: number;
  /** Aborted when the socket closes: the turn under way stops paying for LLM steps. */
  closed: AbortController;
}

/** The client address of an upgrade request, as Koa's `ctx.ip` would give it. */
function clientAddress(req: IncomingMessage, trustProxy: boolean): string {
  const forwarded = trustProxy ? String(req.headers['x-forwarded-for'] ?? '').split(',')[0].trim() : '';
  return forwarded || req.socket.remoteAddress || '';
}

/**
 * The bot WebSocket (`wsUrl`, docs/bots.md): credentials and Origin checked at the upgrade
 * (refused with the error envelope), then `hello`; each `message` runs a turn whose steps and
 * LLM text stream as they happen, ending with `reply`. A bad message gets an `error` frame and
 * the socket stays open; credentials that stop being good close it.
 */
export class BotSocketServer {
  private readonly wss: WebSocketServer;
  private readonly sessions = new Set<Session>();

  constructor(private readonly opts: BotSocketServerOptions) {
    this.wss = new WebSocketServer({ noServer: true, maxPayload: opts.maxMessageBytes });
  }

  /** Open bot sockets (for metrics). */
  get size(): number {
    return this.sessions.size;
  }

  /** For the HTTP server's 'upgrade' event; answers only bot socket paths. */
  handleUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer): boolean {
    const url = new URL(req.url ?? '/', 'http://x');
    const botId = BOT_WS_PATH.exec(url.pathname)?.[1];
    if (botId === undefined) return false;
    this.admit(req, url, botId).then(
      ({ bot, creds }) => this.wss.handleUpgrade(req, socket, head, (ws) => this.accept(ws, bot, creds, clientAddress(req, this.opts.trustProxy))),
      (err) => {
        if (isUnexpected(err)) this.opts.log.warn({ err }, 'bot socket upgrade failed');
        refuseUpgrade(socket, toApiError(err));
      },
    );
    return true;
  }

  /** Closes every bot socket (shutdown); clients reconnect and continue with their conversation_id. */
  close(): void {
    for (const s of this.sessions) s.ws.close(1012, 'the gateway is restarting; reconnect');
    this.wss.close();
  }

  private async admit(req: IncomingMessage, url: URL, botId: string): Promise<{ bot: BotRecord; creds: BotCredentials }> {
    const tokens = url.searchParams.getAll('token');
    const creds = botCredentials(req.headers, tokens.length > 1 ? tokens : tokens[0]);
    const bot = await this.opts.bots.get(botId);
    if (!bot) throw new NotFoundError('bot');
    await this.opts.bots.authorize(bot, creds);
    return { bot, creds };
  }

  private accept(ws: WebSocket, bot: BotRecord, creds: BotCredentials, client: string): void {
    const session: Session = { ws, bot, creds, client, queue: Promise.resolve(), waiting: 0, closed: new AbortController() };
    this.sessions.add(session);
    ws.on('message', (data: RawData, isBinary: boolean) => this.onMessage(session, data, isBinary));
    ws.on('close', () => {
      this.sessions.delete(session);
      session.closed.abort();
    });
    ws.on('error', () => {});
    this.send(session, { type: 'hello', bot: { id: bot.id, name: bot.name }, greeting: bot.greeting });
  }

  private onMessage(session: Session, data: RawData, isBinary: boolean): void {
    let msg: Record<string, unknown>;
    try {
      if (isBinary) throw new ApiError('invalid_request', 'send messages as JSON text frames');
      msg = parseJsonObject(data.toString(), 'the message');
      if (jsonDepth(msg, this.opts.maxDepth) > this.opts.maxDepth) throw new ApiError('invalid_request', `the message is nested deeper than ${this.opts.maxDepth} levels`);
    } catch (err) {
      return this.fail(session, err);
    }
    // A ping is answered at once, even while a turn is under way.
    if (msg.type === 'ping') return this.send(session, { type: 'pong' });
    if (session.waiting >= MAX_WAITING) {
      return this.fail(session, new ApiError('rate_limited', `${MAX_WAITING} messages are already waiting for their replies; send more once they are answered`));
    }
    session.waiting++;
    session.queue = session.queue.then(() =>
      this.turn(session, msg)
        .catch((err) => this.fail(session, err))
        .finally(() => session.waiting--),
    );
  }

  private async turn(session: Session, msg: Record<string, unknown>): Promise<void> {
    if (session.ws.readyState !== session.ws.OPEN) return;
    if (msg.type !== 'message') throw new ApiError('invalid_request', `unknown message type ${JSON.stringify(msg.type ?? null)}: use message or ping`);
    const { text, conversation_id } = assertValid<{ text: string; conversation_id?: string }>(B.socketMessage, msg, 'the message');
    const bot = await this.recheck(session);
    if (!bot) return;
    const signal = session.closed.signal;
    const result = await this.opts.turns.run(bot, { message: text, conversation_id }, session.client, {
      signal,
      onConversation: (id) => this.send(session, { type: 'conversation', conversation_id: id }),
      onStep: (step) => this.send(session, { type: 'step', step }),
      onDelta: (delta) => this.send(session, { type: 'delta', text: delta }),
    });
    this.send(session, { type: 'reply', ...result });
  }

  /**
   * The bot and credentials again, for every message: a session token expires and a bot may be
   * deleted while the socket is open. When they no longer hold, the socket closes (null).
   */
  private async recheck(session: Session): Promise<BotRecord | null> {
    try {
      const bot = await this.opts.bots.get(session.bot.id);
      if (!bot) throw new NotFoundError('bot');
      await this.opts.bots.authorize(bot, session.creds);
      return bot;
    } catch (err) {
      const close = err instanceof ApiError ? CLOSE_FOR[err.code] : undefined;
      if (!close) throw err;
      this.fail(session, err);
      session.ws.close(close, (err as ApiError).code);
      return null;
    }
  }

  private fail(session: Session, err: unknown): void {
    if (isUnexpected(err)) this.opts.log.error({ err, botId: session.bot.id }, 'bot socket message failed');
    this.send(session, errorFrame(err));
  }

  private send(session: Session, frame: object): void {
    if (session.ws.readyState === session.ws.OPEN) session.ws.send(JSON.stringify(frame));
  }
}
