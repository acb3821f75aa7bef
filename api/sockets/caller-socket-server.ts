import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import type { Logger } from 'pino';
import { WebSocketServer, type RawData, type WebSocket } from 'ws';
import { errorFrame, isUnexpected, refuseUpgrade } from './socket-errors.js';
import { ApiError, UnauthorizedError, toApiError } from '../../models/errors.js';
import { RUN_ID_PATTERN } from '../../models/ids.js';
import type { RunRecord } from '../../models/types.js';
import type { ApiKeyAuthenticator, Principal } from '../services/auth/api-key-authenticator.js';
import type { RequestGate } from '../services/auth/request-gate.js';
import { presentedKey } from '../services/auth/bearer.js';
import { jsonDepth, parseJsonObject } from '../http/middleware/json-body.js';
import { acceptedView } from '../contract/presenters.js';
import * as S from '../contract/schemas.js';
import type { JobService, SubmitJobBody } from '../services/jobs/job-service.js';
import { assertValid } from '../../models/validation.js';
import type { RunFollower } from '../services/events/run-follower.js';

export const CALLER_WS_PATH = '/v1/ws';

export interface CallerSocketServerOptions {
  auth: ApiKeyAuthenticator;
  gate: RequestGate;
  jobs: JobService;
  follower: RunFollower;
  log: Logger;
  /** Largest message, as for JSON bodies. */
  maxMessageBytes: number;
  maxDepth: number;
  /** Unsent bytes before a slow client is closed (it resubscribes with `after`). */
  bufferBytes: number;
  /** Time allowed for `{type: "auth"}` when no key came with the upgrade. @defaultValue 10000 */
  authTimeoutMs?: number;
}

interface Session {
  ws: WebSocket;
  principal?: Principal;
  subscriptions: Map<string, () => void>;
  /** Messages are handled one after another, in the order sent (a subscribe's replay runs on its own). */
  queue: Promise<void>;
  /** Aborts when the socket closes: a submit still staging its files then creates nothing. */
  closed: AbortController;
}

/** Close codes beyond RFC 6455's: 4401 no valid key, 4408 no auth in time. 1013 = too slow. */
const CLOSE_UNAUTHORIZED = 4401;
const CLOSE_AUTH_TIMEOUT = 4408;
const CLOSE_TOO_SLOW = 1013;
/** Runs one socket may follow at once (each holds a hub listener until its run ends). */
const MAX_SUBSCRIPTIONS = 100;

/**
 * The callers' WebSocket (docs/api.md "Events"): authenticate by header or first message,
 * submit jobs, subscribe to runs (`after` = the last event id seen). Every bad message is
 * answered with an error frame and the connection stays open; only auth failures close it.
 */
export class CallerSocketServer {
  private readonly wss: WebSocketServer;
  private readonly sessions = new Set<Session>();

  constructor(private readonly opts: CallerSocketServerOptions) {
    this.wss = new WebSocketServer({ noServer: true, maxPayload: opts.maxMessageBytes });
  }

  get size(): number {
    return this.sessions.size;
  }

  handleUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer): boolean {
    if (new URL(req.url ?? '/', 'http://x').pathname !== CALLER_WS_PATH) return false;
    let key: string | null;
    try {
      key = presentedKey(req.headers);
    } catch (err) {
      refuseUpgrade(socket, toApiError(err));
      return true;
    }
    const upgrade = (principal?: Principal) => this.wss.handleUpgrade(req, socket, head, (ws) => this.accept(ws, principal));
    if (key === null) {
      upgrade();
      return true;
    }
    this.identify(key).then(upgrade, (err) => {
      if (isUnexpected(err)) this.opts.log.warn({ err }, 'caller socket upgrade failed');
      refuseUpgrade(socket, toApiError(err));
    });
    return true;
  }

  /** Closes every caller socket (shutdown); clients reconnect and resubscribe with `after`. */
  close(): void {
    for (const s of this.sessions) s.ws.close(1012, 'the gateway is restarting; reconnect');
    this.wss.close();
  }

  private async identify(key: string): Promise<Principal> {
    const principal = await this.opts.auth.identify(key);
    await this.admit(principal);
    return principal;
  }

  /** The same per-key gate as HTTP requests: revocation at once, the rate limit per message. */
  private async admit(principal: Principal): Promise<void> {
    const verdict = await this.opts.gate.admit(principal);
    if (verdict.outcome === 'revoked') throw new UnauthorizedError('the API key has been revoked');
    if (verdict.outcome === 'limited') {
      throw new ApiError('rate_limited', 'too many requests for this API key', { details: { retry_after_ms: verdict.retryAfterMs } });
    }
  }

  private accept(ws: WebSocket, principal?: Principal): void {
    const session: Session = { ws, principal, subscriptions: new Map(), queue: Promise.resolve(), closed: new AbortController() };
    this.sessions.add(session);
    const timer = principal ? undefined : setTimeout(() => ws.close(CLOSE_AUTH_TIMEOUT, 'send {"type":"auth","key":"..."} first'), this.opts.authTimeoutMs ?? 10_000);
    ws.on('message', (data: RawData, isBinary: boolean) => {
      session.queue = session.queue.then(() => this.onMessage(session, data, isBinary)).then(() => {
        if (session.principal) clearTimeout(timer);
      });
    });
    ws.on('close', () => {
      session.closed.abort();
      clearTimeout(timer);
      this.sessions.delete(session);
      for (const stop of session.subscriptions.values()) stop();
      session.subscriptions.clear();
    });
    ws.on('error', () => {});
    if (principal) this.send(session, { type: 'authenticated', account_id: principal.accountId });
  }

  private async onMessage(session: Session, data: RawData, isBinary: boolean): Promise<void> {
    let ref: unknown;
    let authAttempt = false;
    try {
      if (isBinary) throw new ApiError('invalid_request', 'send messages as JSON text frames');
      const msg = parseJsonObject(data.toString(), 'the message');
      if (jsonDepth(msg, this.opts.maxDepth) > this.opts.maxDepth) throw new ApiError('invalid_request', `the message is nested deeper than ${this.opts.maxDepth} levels`);
      ref = msg.id;
      authAttempt = msg.type === 'auth';
      if (ref !== undefined && !((typeof ref === 'string' && ref.length <= 200) || Number.isSafeInteger(ref))) {
        ref = undefined;
        throw new ApiError('invalid_request', '`id` (echoed in the answer) must be a string of at most 200 characters or an integer');
      }
      await this.handle(session, msg, ref);
    } catch (err) {
      if (isUnexpected(err)) this.opts.log.error({ err }, 'caller socket message failed');
      const frame = errorFrame(err, ref === undefined ? {} : { id: ref });
      this.send(session, frame);
      // A wrong key ends the connection; asking before authenticating does not.
      if (frame.code === 'unauthorized' && authAttempt && !session.principal) session.ws.close(CLOSE_UNAUTHORIZED, 'unauthorized');
    }
  }

  private async handle(session: Session, msg: Record<string, unknown>, ref: unknown): Promise<void> {
    const echo = ref === undefined ? {} : { id: ref };
    if (msg.type === 'ping') return this.send(session, { type: 'pong', ...echo });
    if (msg.type === 'auth') {
      if (session.principal) throw new ApiError('invalid_request', 'this connection is already authenticated');
      if (typeof msg.key !== 'string' || msg.key === '') throw new UnauthorizedError('`key` must be an API key');
      session.principal = await this.identify(msg.key);
      return this.send(session, { type: 'authenticated', ...echo, account_id: session.principal.accountId });
    }
    if (!session.principal) throw new UnauthorizedError('authenticate first: {"type":"auth","key":"<API key>"} (or send Authorization with the upgrade)');
    switch (msg.type) {
      case 'submit': {
        await this.admit(session.principal);
        const { type: _t, id: _i, idempotency_key: idem, ...body } = msg;
        if (idem !== undefined && (typeof idem !== 'string' || idem.length === 0 || idem.length > 255)) {
          throw new ApiError('invalid_request', '`idempotency_key` must be a string of 1 to 255 characters');
        }
        assertValid(S.submitJobBody, body, 'the job');
        const { run, replayed } = await this.opts.jobs.submit(session.principal.accountId, body as unknown as SubmitJobBody, idem as string | undefined, undefined, session.closed.signal, session.principal.keyId);
        return this.send(session, { type: 'accepted', ...echo, ...acceptedView(run), ...(replayed ? { replayed: true } : {}) });
      }
      case 'subscribe':
        await this.admit(session.principal);
        return this.subscribe(session, msg, echo);
      case 'unsubscribe': {
        const runId = String(msg.run_id ?? '');
        session.subscriptions.get(runId)?.();
        session.subscriptions.delete(runId);
        return this.send(session, { type: 'unsubscribed', ...echo, run_id: runId });
      }
      default:
        throw new ApiError('invalid_request', `unknown message type ${JSON.stringify(msg.type ?? null)}: use auth, submit, subscribe, unsubscribe or ping`);
    }
  }

  private async subscribe(session: Session, msg: Record<string, unknown>, echo: object): Promise<void> {
    const runId = msg.run_id;
    if (typeof runId !== 'string') throw new ApiError('invalid_request', '`run_id` is required');
    const after = msg.after;
    if (after !== undefined && after !== null && !(Number.isSafeInteger(after) && (after as number) >= 0)) {
      throw new ApiError('invalid_request', '`after` must be the id of an event already received (an integer >= 0)');
    }
    if (!RUN_ID_PATTERN.test(runId)) throw new ApiError('not_found', 'run not found', { details: { run_id: runId } });
    const run = await this.opts.jobs.get(session.principal!.accountId, runId).catch((err) => {
      throw err instanceof ApiError && err.code === 'not_found' ? new ApiError('not_found', 'run not found', { details: { run_id: runId } }) : err;
    });
    if (!session.subscriptions.has(runId) && session.subscriptions.size >= MAX_SUBSCRIPTIONS) {
      throw new ApiError('invalid_request', `at most ${MAX_SUBSCRIPTIONS} subscriptions per connection: unsubscribe from finished runs`);
    }
    // Subscribing again restarts from the new `after`. Messages are handled concurrently, so the
    // map holds a placeholder while the follow starts: an unsubscribe, a newer subscribe or the
    // socket closing in that time replaces or clears it, and the late follow is stopped at once.
    session.subscriptions.get(runId)?.();
    const placeholder = () => {};
    session.subscriptions.set(runId, placeholder);
    this.send(session, { type: 'subscribed', ...echo, run_id: runId });
    // The follow (and its replay, paced by the client) runs on its own: later messages of the
    // socket need not wait for it.
    void this.follow(session, run, (after as number | undefined) ?? null, placeholder).catch((err) => {
      this.opts.log.warn({ err, runId }, 'a caller socket subscription failed');
      if (session.subscriptions.get(runId) === placeholder) session.subscriptions.delete(runId);
      this.send(session, { type: 'error', code: 'unavailable', message: 'the subscription failed; subscribe again with after', run_id: runId });
    });
  }

  private async follow(session: Session, run: RunRecord, after: number | null, placeholder: () => void): Promise<void> {
    const { ws } = session;
    const runId = run.run_id;
    let replaying = true;
    let ended = false;
    let stop: (() => void) | undefined;
    stop = await this.opts.follower.follow(run, after, {
      send: (e) => {
        if (ws.readyState !== ws.OPEN) return;
        ws.send(e.wsFrame(runId));
        if (ws.bufferedAmount > this.opts.bufferBytes && !replaying) ws.close(CLOSE_TOO_SLOW, 'too slow: reconnect and subscribe with after');
      },
      end: () => {
        ended = true;
        const current = session.subscriptions.get(runId);
        if (current === placeholder || (stop && current === stop)) session.subscriptions.delete(runId);
      },
      drained: () => (ws.bufferedAmount > this.opts.bufferBytes && ws.readyState === ws.OPEN ? drain(ws, this.opts.bufferBytes) : undefined),
    });
    replaying = false;
    if (!ended && ws.readyState === ws.OPEN && session.subscriptions.get(runId) === placeholder) session.subscriptions.set(runId, stop);
    else stop();
  }

  private send(session: Session, frame: object): void {
    if (session.ws.readyState === session.ws.OPEN) session.ws.send(JSON.stringify(frame));
  }
}

/** Waits until the socket's unsent bytes fall under `limit` (ws has no 'drain' event of its own). */
function drain(ws: WebSocket, limit: number): Promise<void> {
  return new Promise((resolve) => {
    const check = () => (ws.bufferedAmount <= limit || ws.readyState !== ws.OPEN ? resolve() : setTimeout(check, 10));
    check();
  });
}
