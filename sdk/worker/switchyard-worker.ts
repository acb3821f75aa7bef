import { EventEmitter } from 'node:events';
import WebSocket, { type RawData } from 'ws';
import type { EngineArtifact, EngineContext, EngineResult } from '../engines/types.js';
import { ReceiptSigner, type ReceiptSubject } from './attestation.js';
import { isRecord } from './is-record.js';
import type { WorkerLogger } from './logger.js';
import { UploadError, uploadArtifact } from './upload.js';
import { WorkerRefusedError, type GatewayErrorFrame, type SwitchyardWorkerEvents } from './worker-events.js';
import { handlerFor, resolveWorkerOptions, type KindHandler, type ReconnectOptions, type SwitchyardWorkerOptions, type WorkerHandler } from './worker-options.js';
import {
  MAX_ERROR_MESSAGE,
  MAX_HEARTBEAT_LEASES,
  MAX_LOG_LINE,
  MAX_OUTPUT_DELTA,
  MAX_PROGRESS_MESSAGE,
  PROTOCOL_VERSIONS,
  type FailureReport,
  type LeaseInfo,
  type RegisteredInfo,
  type Tier,
} from '../protocol/index.js';

export { PROTOCOL_VERSIONS, WORKER_PATH, workerSocketUrl, type FailureReport, type LeaseInfo, type RegisteredInfo, type Tier } from '../protocol/index.js';
export { SDK_VERSION, type KindHandler, type ReconnectOptions, type SwitchyardWorkerOptions, type WorkerHandler } from './worker-options.js';
export { WorkerRefusedError, type DisconnectInfo, type GatewayErrorFrame, type SwitchyardWorkerEvents } from './worker-events.js';

/**
 * A worker process of the Switchyard fleet: connects out to a gateway over the worker protocol
 * (docs/worker-protocol.md), runs the leases it is given with your handler, uploads the
 * artifacts and reports the outcome. Reconnects on its own; `stop()` lets running work finish.
 */

// ---- internals --------------------------------------------------------------------------------

const FATAL_CLOSE_CODES = new Set([4400, 4401, 4403]);
/** Error codes that, before registration, mean "try again later" rather than "you are refused". */
const TRANSIENT_ERROR_CODES = new Set(['internal', 'unavailable', 'attestation_timeout']);
/** The gateway's frame limit is MAX_FRAME_BYTES (1 MiB); a report stays under it with room for the envelope. */
const MAX_REPORT_BYTES = 1_000_000;
/** A registration that lasted this long resets the reconnect backoff. */
const STABLE_AFTER_MS = 10_000;
/** On `reconnect`, how long the old socket stays open for answers to frames already sent. */
const MOVE_ANSWER_WAIT_MS = 5_000;
/** Frames held per lease while it moves to another instance; beyond, log lines are dropped. */
const MAX_HELD_FRAMES = 1_000;

type AbortCause = 'canceled' | 'stale' | 'disconnected' | 'stopping';

type Answer = { ok: true; of: string } | { ok: false; code: string; message: string };

interface Connection {
  ws: WebSocket;
  registered: boolean;
  closed: boolean;
  draining: boolean;
  heartbeatMs: number;
  timers: NodeJS.Timeout[];
  lastPong: number;
  /** Leases received on this socket and not yet settled. */
  leases: Set<string>;
  /** Why the gateway refused the socket, if it did (error frame or HTTP answer). */
  refusal?: { code: string; message: string; status?: number };
  /** Closed by us to reconnect at once (after a drain). */
  reconnectNow: boolean;
  /** The gateway sent `reconnect`: its leases move to the next connection (protocol 2). */
  moving: boolean;
  /** The register frame claimed leases (`resume`). */
  claimed: boolean;
}

interface LeaseState {
  info: LeaseInfo;
  conn: Connection;
  controller: AbortController;
  cause: AbortCause | null;
  phase: 'pending' | 'running' | 'reporting' | 'done';
  /** Frames sent for this lease, and answers (ack or error) received for them. */
  sent: number;
  answered: number;
  /** The frames sent on this connection and not answered yet, oldest first (answers come in order). */
  unanswered: Record<string, unknown>[];
  /** `unavailable` answers in a row: the resend waits longer each time. */
  outageRetries: number;
  /** Frames answered `unavailable`, sent again together, in their order, when `resendTimer` fires. */
  resend: Record<string, unknown>[];
  resendTimer?: NodeJS.Timeout;
  /** Set when the final report is sent: resolved by the answer to frame number `finalIndex`. */
  finalIndex?: number;
  finalType?: string;
  onFinalAnswer?: (a: Answer) => void;
  lastProgressAt: number;
  pendingProgress: { progress: number; message?: string } | null;
  progressTimer?: NodeJS.Timeout;
  /** Between connections (a move to another instance): its frames are held until it is resumed. */
  moving: boolean;
  held: Record<string, unknown>[];
  /** The final report, kept so it can go out (again) on the connection the lease moves to. */
  finalFrame?: Record<string, unknown>;
  finalTimer?: NodeJS.Timeout;
  /** The final report waits for the answers to the lease's earlier frames (see sendFinal). */
  finalHeld?: boolean;
  /** Why a lease that did not survive a move was lost, for its `dropped` event. */
  lostInMove?: string;
  /** Private leases: what the receipt signs, to sign it again under a new worker id after a move. */
  receiptSubject?: ReceiptSubject;
}

type Outcome = { type: 'complete'; output: Record<string, unknown>; receipt?: string } | { type: 'fail'; error: FailureReport };

function abortError(message: string): Error {
  return new DOMException(message, 'AbortError');
}

/** `text` cut to at most `max` UTF-16 units without splitting a surrogate pair. */
function cut(text: string, max: number): string {
  if (text.length <= max) return text;
  let end = max;
  const c = text.charCodeAt(end - 1);
  if (c >= 0xd800 && c <= 0xdbff) end--;
  return text.slice(0, end);
}

function chunks(text: string, max: number): string[] {
  const out: string[] = [];
  let rest = text;
  while (rest.length > max) {
    const part = cut(rest, max);
    out.push(part);
    rest = rest.slice(part.length);
  }
  if (rest.length || !out.length) out.push(rest);
  return out;
}

function errorCodeOf(value: unknown): string | null {
  if (typeof value !== 'string') return null;
  const code = value
    .toLowerCase()
    .replace(/[^a-z0-9_]+/g, '_')
    .replace(/^[^a-z]+/, '')
    .slice(0, 64);
  return code === '' ? null : code;
}

function parseLease(frame: Record<string, unknown>): LeaseInfo | null {
  const f = frame as Partial<LeaseInfo>;
  if (typeof f.lease_id !== 'string' || typeof f.fence !== 'number' || typeof f.run_id !== 'string' || typeof f.kind !== 'string') return null;
  if (typeof f.upload_url !== 'string' || typeof f.upload_token !== 'string') return null;
  return {
    lease_id: f.lease_id,
    fence: f.fence,
    run_id: f.run_id,
    kind: f.kind,
    tier: (f.tier ?? 'open') as Tier,
    attempt: typeof f.attempt === 'number' ? f.attempt : f.fence,
    input: isRecord(f.input) ? f.input : {},
    ...(typeof f.input_sha256 === 'string' ? { input_sha256: f.input_sha256 } : {}),
    upload_url: f.upload_url,
    upload_token: f.upload_token,
  };
}

function checkResult(result: unknown): EngineResult {
  if (!isRecord(result) || !Array.isArray(result.artifacts)) throw Object.assign(new Error('the handler must resolve to {artifacts: [...], extra?}'), { code: 'bad_result', retryable: false });
  for (const a of result.artifacts as EngineArtifact[]) {
    if (!isRecord(a) || typeof a.name !== 'string' || !(a.data instanceof Uint8Array)) {
      throw Object.assign(new Error('each artifact must be {name, contentType, data: Buffer}'), { code: 'bad_result', retryable: false });
    }
  }
  if (result.extra !== undefined && !isRecord(result.extra)) throw Object.assign(new Error('extra must be an object'), { code: 'bad_result', retryable: false });
  return result as unknown as EngineResult;
}

/**
 * A Switchyard worker. Typical use:
 *
 * ```ts
 * const worker = new SwitchyardWorker({ gateway: 'https://gw.example', token: 'swt_...', kinds: ['inference:image:generate'],
 *   slots: 2, handler: async (kind, input, ctx) => ({ artifacts: [{ name: 'out.png', contentType: 'image/png', data: png }] }) });
 * await worker.start();          // resolves once registered; rejects with WorkerRefusedError if refused
 * process.on('SIGTERM', () => void worker.stop());
 * ```
 */
export class SwitchyardWorker extends EventEmitter<SwitchyardWorkerEvents> {
  readonly url: string;
  readonly kinds: string[];
  readonly tier: Tier;
  readonly slots: number;
  private readonly log: WorkerLogger;
  private readonly handler: WorkerHandler;
  private readonly hardware: Record<string, unknown>;
  private readonly software: Record<string, unknown>;
  private readonly backoff: Required<ReconnectOptions>;
  private readonly progressIntervalMs: number;
  private readonly reportTimeoutMs: number;
  /** Private workers: the receipt key and the source of evidence. */
  private readonly signer?: ReceiptSigner;
  private receiptJwk?: Record<string, unknown>;

  private state: 'idle' | 'running' | 'stopping' | 'stopped' = 'idle';
  private conn: Connection | null = null;
  private failedTries = 0;
  private reconnectTimer?: NodeJS.Timeout;
  private readonly leases = new Map<string, LeaseState>();
  private readonly pending: LeaseState[] = [];
  /** Leases on their way to another gateway instance, claimed at the next registration. */
  private readonly moving = new Set<LeaseState>();
  private moveTries = 0;
  private moveDeadline?: NodeJS.Timeout;
  private leaseTtlMs = 30_000;
  /** Handler calls (and their uploads) in flight, including ones of lost connections still winding down. */
  private busy = 0;
  private started?: { resolve: () => void; reject: (err: Error) => void };
  private stopping?: { promise: Promise<void>; resolve: () => void; abortTimer?: NodeJS.Timeout; giveUpTimer?: NodeJS.Timeout; forced: boolean };
  private readonly finished: Promise<void>;
  private settleFinished!: { resolve: () => void; reject: (err: Error) => void };
  /** The gateway's id for the current registration. */
  workerId: string | null = null;

  constructor(private readonly opts: SwitchyardWorkerOptions) {
    super();
    const settings = resolveWorkerOptions(opts);
    this.url = settings.url;
    this.kinds = settings.kinds;
    this.tier = settings.tier;
    this.slots = settings.slots;
    this.handler = settings.handler;
    this.hardware = settings.hardware;
    this.software = settings.software;
    this.log = settings.log;
    this.backoff = settings.backoff;
    this.progressIntervalMs = settings.progressIntervalMs;
    this.reportTimeoutMs = settings.reportTimeoutMs;
    if (opts.attestation) this.signer = new ReceiptSigner(opts.attestation);
    this.finished = new Promise<void>((resolve, reject) => (this.settleFinished = { resolve, reject }));
    this.finished.catch(() => {});
  }

  /** Leases held: running, waiting for a slot, or waiting for the gateway's answer to their report. */
  get activeLeases(): number {
    return this.leases.size;
  }

  /** Handler calls running now (never more than `slots`). */
  get running(): number {
    return this.busy;
  }

  get connected(): boolean {
    return !!this.conn?.registered && !this.conn.closed;
  }

  /**
   * Connects and registers. Resolves once the gateway accepted the worker (a gateway that does
   * not answer is retried with backoff meanwhile); rejects with a `WorkerRefusedError` when it
   * refuses the token, tier or registration.
   */
  start(): Promise<void> {
    if (this.state !== 'idle') return Promise.reject(new Error(`the worker is already ${this.state === 'running' ? 'started' : this.state}`));
    this.state = 'running';
    const p = new Promise<void>((resolve, reject) => (this.started = { resolve, reject }));
    p.catch(() => {}); // a caller that does not await start() still hears of a refusal: 'refused', wait(), the log
    if (!this.signer) this.connect();
    else {
      // The receipt key is registered with the worker, so it exists before the first connection.
      this.signer.publicJwk().then(
        (jwk) => {
          this.receiptJwk = jwk as Record<string, unknown>;
          this.connect();
        },
        (err: Error) => {
          this.log.error('could not make the receipt key', { err: err.message });
          this.started?.reject(err);
          this.finishStop(err);
        },
      );
    }
    return p;
  }

  /** Resolves when the worker has stopped; rejects with a `WorkerRefusedError` if the gateway refused it. */
  wait(): Promise<void> {
    return this.finished;
  }

  /**
   * Graceful stop: no new lease is started, running ones finish and report, then the socket
   * closes (leases that arrived meanwhile go back to the queue). After `timeoutMs` (default
   * 30 s; 0 = at once) running handlers are aborted and the socket closed without waiting.
   */
  stop(opts: { timeoutMs?: number } = {}): Promise<void> {
    const timeoutMs = opts.timeoutMs ?? 30_000;
    if (this.state === 'idle' || this.state === 'stopped') {
      this.state = 'stopped';
      this.settleFinished.resolve();
      return Promise.resolve();
    }
    if (this.stopping) {
      if (timeoutMs < Infinity) this.scheduleAbort(timeoutMs);
      return this.stopping.promise;
    }
    this.state = 'stopping';
    // A move to another instance in progress goes on: its leases finish there.
    if (this.moving.size === 0) clearTimeout(this.reconnectTimer);
    let resolve!: () => void;
    const promise = new Promise<void>((r) => (resolve = r));
    this.stopping = { promise, resolve, forced: false };
    this.started?.reject(new Error('the worker was stopped before it registered'));
    this.started = undefined;
    this.log.info('stopping: no new leases; waiting for running ones', { running: this.busy, held: this.leases.size });
    if (this.conn && !this.conn.registered && this.moving.size === 0) this.conn.ws.terminate();
    if (timeoutMs < Infinity) this.scheduleAbort(timeoutMs);
    this.checkIdle();
    this.checkStopped();
    return promise;
  }

  private scheduleAbort(timeoutMs: number): void {
    const s = this.stopping!;
    clearTimeout(s.abortTimer);
    s.abortTimer = setTimeout(() => {
      if (s.forced) return;
      s.forced = true;
      this.log.warn('stop timeout: aborting running leases (they go back to the queue)', { running: this.busy });
      for (const lease of this.leases.values()) this.abortLease(lease, 'stopping');
      if (this.conn) this.conn.ws.close(1000, 'worker stopping');
      // Handlers that ignore their signal are not waited for forever.
      s.giveUpTimer = setTimeout(() => this.finishStop(), 5_000);
      this.checkStopped();
    }, Math.max(0, timeoutMs));
  }

  // ---- connection -----------------------------------------------------------------------------

  /** Connecting is for a running worker, or a stopping one whose leases are moving to another instance. */
  private mayConnect(): boolean {
    return this.state === 'running' || (this.state === 'stopping' && this.moving.size > 0 && !this.stopping?.forced);
  }

  private connect(): void {
    if (!this.mayConnect()) return;
    const ws = new WebSocket(this.url, {
      handshakeTimeout: 15_000,
      ...this.opts.webSocket,
      headers: { ...(this.opts.webSocket?.headers ?? {}), authorization: `Bearer ${this.opts.token}` },
    });
    const conn: Connection = { ws, registered: false, closed: false, draining: false, heartbeatMs: 5_000, timers: [], lastPong: Date.now(), leases: new Set(), reconnectNow: false, moving: false, claimed: false };
    this.conn = conn;
    this.log.debug('connecting', { url: this.url });

    ws.on('open', () => {
      // Leases brought from a stopping instance are claimed with the upload token only their lease frame carried.
      const resume = [...this.moving].map((l) => ({ lease_id: l.info.lease_id, fence: l.info.fence, upload_token: l.info.upload_token }));
      conn.claimed = resume.length > 0;
      this.sendRaw(conn, {
        type: 'register',
        protocol: [...PROTOCOL_VERSIONS],
        kinds: this.kinds,
        tier: this.tier,
        slots: this.slots,
        hardware: this.hardware,
        software: this.software,
        ...(this.tier === 'private' ? { receipt_key: this.receiptJwk } : {}),
        ...(resume.length ? { resume } : {}),
      });
    });
    ws.on('unexpected-response', (_req, res) => {
      const status = res.statusCode ?? 0;
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => {
        if (body.length < 4096) body += d;
      });
      const done = () => {
        let code = `http_${status}`;
        let message = `the gateway answered the upgrade with HTTP ${status}`;
        try {
          const e = (JSON.parse(body) as { error?: { code?: string; message?: string } }).error;
          if (e?.code) code = e.code;
          if (e?.message) message = e.message;
        } catch {
          // not the gateway's envelope
        }
        conn.refusal = { code, message, status };
        ws.terminate();
      };
      res.on('end', done);
      res.on('error', done);
    });
    ws.on('pong', () => (conn.lastPong = Date.now()));
    ws.on('message', (data: RawData, isBinary: boolean) => {
      conn.lastPong = Date.now();
      if (isBinary) return this.log.warn('ignoring a binary frame from the gateway');
      let frame: unknown;
      try {
        frame = JSON.parse(data.toString('utf8'));
      } catch {
        return this.log.warn('ignoring a frame from the gateway that is not JSON');
      }
      if (!isRecord(frame) || typeof frame.type !== 'string') return this.log.warn('ignoring a frame from the gateway without a type');
      try {
        this.onFrame(conn, frame);
      } catch (err) {
        this.log.error('could not handle a frame from the gateway', { type: frame.type, err: (err as Error).message });
      }
    });
    ws.on('error', (err) => {
      if (!conn.refusal) this.log.debug('socket error', { err: err.message });
      (conn as { lastError?: string }).lastError = err.message;
    });
    ws.on('close', (code, reason) => this.onClose(conn, code, reason.toString('utf8')));
  }

  private sendRaw(conn: Connection, frame: Record<string, unknown>): boolean {
    if (conn.closed || conn.ws.readyState !== WebSocket.OPEN) return false;
    conn.ws.send(JSON.stringify(frame));
    return true;
  }

  private onFrame(conn: Connection, frame: Record<string, unknown>): void {
    switch (frame.type) {
      case 'registered':
        return this.onRegistered(conn, frame);
      case 'lease':
        return this.onLease(conn, frame);
      case 'cancel':
        return this.onCancel(frame);
      case 'attest':
        return this.onAttest(conn, frame);
      case 'attested':
        return this.log.info('attestation evidence renewed', { expires_at: frame.expires_at });
      case 'reconnect':
        return this.onReconnect(conn);
      case 'drain':
        conn.draining = true;
        this.log.info('the gateway asked to drain: finishing current leases, then reconnecting');
        return this.checkIdle();
      case 'ack':
        return this.onAnswer(frame.lease_id, { ok: true, of: String(frame.of) });
      case 'error':
        return this.onErrorFrame(conn, frame);
      default:
        this.log.debug('ignoring an unknown frame type', { type: frame.type });
    }
  }

  private onRegistered(conn: Connection, frame: Record<string, unknown>): void {
    if (conn.registered) return;
    const info: RegisteredInfo = {
      worker_id: String(frame.worker_id),
      protocol: Number(frame.protocol),
      heartbeat_ms: typeof frame.heartbeat_ms === 'number' && frame.heartbeat_ms > 0 ? frame.heartbeat_ms : 5_000,
      lease_ttl_ms: typeof frame.lease_ttl_ms === 'number' ? frame.lease_ttl_ms : 30_000,
    };
    conn.registered = true;
    conn.heartbeatMs = info.heartbeat_ms;
    conn.lastPong = Date.now();
    this.workerId = info.worker_id;
    conn.timers.push(setInterval(() => this.heartbeat(conn), info.heartbeat_ms));
    conn.timers.push(setTimeout(() => (this.failedTries = 0), STABLE_AFTER_MS));
    this.leaseTtlMs = info.lease_ttl_ms;
    this.moveTries = 0;
    const attested = isRecord(frame.attestation) ? { attestation_expires_at: frame.attestation.expires_at } : {};
    this.log.info('registered', { worker_id: info.worker_id, kinds: this.kinds.join(','), tier: this.tier, slots: this.slots, ...attested });
    if (this.moving.size > 0) this.settleMoves(conn, frame);
    this.emit('registered', info);
    this.started?.resolve();
    this.started = undefined;
    if (this.state === 'stopping') this.checkIdle();
  }

  private heartbeat(conn: Connection): void {
    if (conn.closed) return;
    // The gateway answers pings (and every report); a silent one over three beats is gone.
    if (Date.now() - conn.lastPong > 3 * conn.heartbeatMs + 1_000) {
      this.log.warn('the gateway stopped answering; reconnecting');
      conn.ws.terminate();
      return;
    }
    this.sendRaw(conn, { type: 'heartbeat', leases: [...conn.leases].slice(0, MAX_HEARTBEAT_LEASES) });
    try {
      conn.ws.ping();
    } catch {
      // closing
    }
  }

  private onClose(conn: Connection, code: number, reason: string): void {
    if (conn.closed) return;
    conn.closed = true;
    for (const t of conn.timers) clearTimeout(t);
    if (this.conn === conn) this.conn = null;
    for (const id of conn.leases) {
      const lease = this.leases.get(id);
      if (!lease) continue;
      if (conn.moving && lease.phase !== 'done') {
        this.holdForMove(lease);
        continue;
      }
      this.abortLease(lease, 'disconnected');
      if (lease.phase === 'pending') this.drop(lease, 'the connection closed before it started');
      else if (lease.phase === 'reporting') lease.onFinalAnswer?.({ ok: false, code: 'disconnected', message: 'the connection closed before the gateway answered' });
    }
    conn.leases.clear();

    const refusal = conn.refusal;
    // An instance of protocol 1 refuses `resume` as a bad register: the leases cannot move
    // there (they lapse and are requeued); register again without them.
    const claimRefused = conn.claimed && !conn.registered && refusal?.code === 'bad_frame';
    if (claimRefused) {
      this.loseMoves('the gateway instance cannot take leases back (protocol 1)');
      conn.reconnectNow = true;
    }
    const fatal =
      !claimRefused &&
      (FATAL_CLOSE_CODES.has(code) ||
      (refusal?.status !== undefined && (refusal.status === 401 || refusal.status === 403)) ||
      (!!refusal && refusal.status === undefined && !conn.registered && !TRANSIENT_ERROR_CODES.has(refusal.code)));
    if (fatal && this.state === 'running') {
      const status = refusal?.status ?? code;
      const err = new WorkerRefusedError(
        `the gateway refused this worker (${status}${refusal ? ` ${refusal.code}` : ''}): ${refusal?.message ?? (reason || 'no reason given')}`,
        refusal?.code ?? 'refused',
        status,
      );
      this.log.error(err.message);
      this.emit('disconnected', { code, reason, reconnectInMs: null });
      this.state = 'stopping';
      this.stopping = { promise: Promise.resolve(), resolve: () => {}, forced: true };
      this.started?.reject(err);
      this.started = undefined;
      this.emit('refused', err);
      this.finishStop(err);
      return;
    }
    if (this.mayConnect()) {
      const delay = conn.reconnectNow ? 0 : this.moving.size > 0 ? this.nextMoveDelay() : this.nextDelay();
      const why = refusal?.message ?? (conn as { lastError?: string }).lastError ?? (reason || `close code ${code}`);
      if (conn.moving) this.log.info('reconnecting to move the leases', { leases: this.moving.size });
      else if (conn.registered) this.log.warn('disconnected from the gateway', { code, reason: why, reconnect_in_ms: Math.round(delay) });
      else this.log.warn('could not connect to the gateway', { reason: why, retry_in_ms: Math.round(delay) });
      this.emit('disconnected', { code, reason: reason || why, reconnectInMs: delay });
      this.reconnectTimer = setTimeout(() => this.connect(), delay);
    } else {
      this.emit('disconnected', { code, reason, reconnectInMs: null });
      this.checkStopped();
    }
  }

  /** While leases are moving, retries are quick: they must be claimed before their TTL runs out. */
  private nextMoveDelay(): number {
    const cap = this.moveTries === 0 ? 0 : Math.min(1_000, 100 * 2 ** (this.moveTries - 1));
    this.moveTries++;
    return cap / 2 + Math.random() * (cap / 2);
  }

  private nextDelay(): number {
    const { initialDelayMs, maxDelayMs, factor } = this.backoff;
    const cap = Math.min(maxDelayMs, initialDelayMs * factor ** this.failedTries);
    this.failedTries++;
    // "Equal jitter": half fixed, half random, so a fleet does not reconnect in step.
    return cap / 2 + Math.random() * (cap / 2);
  }

  // ---- leases ---------------------------------------------------------------------------------

  private onLease(conn: Connection, frame: Record<string, unknown>): void {
    const info = parseLease(frame);
    if (!info) {
      this.log.error('ignoring a malformed lease frame', { lease_id: frame.lease_id });
      return;
    }
    const lease: LeaseState = {
      info,
      conn,
      controller: new AbortController(),
      cause: null,
      phase: 'pending',
      sent: 0,
      answered: 0,
      unanswered: [],
      outageRetries: 0,
      resend: [],
      lastProgressAt: 0,
      pendingProgress: null,
      moving: conn.moving,
      held: [],
    };
    this.leases.set(info.lease_id, lease);
    conn.leases.add(info.lease_id);
    this.log.debug('lease', { lease_id: info.lease_id, run_id: info.run_id, kind: info.kind, attempt: info.attempt });
    this.emit('lease', info);
    this.pending.push(lease);
    this.pump();
  }

  /** Starts waiting leases while slots are free (not while stopping: those go back with the socket). */
  private pump(): void {
    while (this.state === 'running' && this.busy < this.slots && this.pending.length) {
      const lease = this.pending.shift()!;
      if (lease.phase !== 'pending' || (lease.conn.closed && !lease.moving)) continue;
      void this.run(lease);
    }
  }

  private async run(lease: LeaseState): Promise<void> {
    const { info, controller } = lease;
    lease.phase = 'running';
    this.busy++;
    let outcome: Outcome;
    try {
      const handler: KindHandler | undefined = handlerFor(this.handler, info.kind);
      if (!handler) throw Object.assign(new Error(`this worker has no handler for ${info.kind}`), { code: 'unsupported_kind', retryable: true });
      const ctx: EngineContext = {
        signal: controller.signal,
        progress: (p, message) => this.progress(lease, p, message),
        log: (line) => {
          if (lease.phase === 'running' && !lease.cause) this.sendLease(lease, { type: 'log', line: cut(String(line), MAX_LOG_LINE) });
        },
        output: (delta) => {
          if (lease.phase !== 'running' || lease.cause) return;
          for (const part of chunks(String(delta), MAX_OUTPUT_DELTA)) this.sendLease(lease, { type: 'output', delta: part });
        },
      };
      const result = checkResult(await handler(info.kind, info.input, ctx));
      if (lease.cause) throw abortError('aborted');
      const urls: string[] = [];
      const signed: ReceiptSubject['artifacts'] = [];
      for (const artifact of result.artifacts) {
        const uploaded = await uploadArtifact(info.upload_url, info.upload_token, artifact, { ...this.opts.upload, signal: controller.signal });
        urls.push(uploaded.url);
        // The upload checked that the gateway stored exactly the bytes hashed here.
        signed.push({ name: artifact.name, sha256: uploaded.sha256 });
      }
      if (lease.cause) throw abortError('aborted');
      const receipt = info.tier === 'private' ? await this.signReceipt(lease, signed) : undefined;
      outcome = { type: 'complete', output: { ...(result.extra ?? {}), urls }, ...(receipt ? { receipt } : {}) };
    } catch (err) {
      outcome = { type: 'fail', error: this.failureOf(lease, err) };
    } finally {
      this.busy--;
    }
    this.flushProgress(lease, false);
    await this.report(lease, outcome);
    this.pump();
    this.checkIdle();
    this.checkStopped();
  }

  // ---- private tier (docs/confidentiality.md) -----------------------------------------------------

  /** The gateway asks for evidence (at registration, and before the current evidence expires). */
  private onAttest(conn: Connection, frame: Record<string, unknown>): void {
    if (!this.signer || typeof frame.nonce !== 'string') return this.log.warn('ignoring an attest frame: this worker has no attestation set up, or the frame has no nonce');
    const nonce = frame.nonce;
    this.signer.evidenceFor(nonce).then(
      (evidence) => {
        this.sendRaw(conn, { type: 'attestation', nonce, evidence });
      },
      (err: Error) => {
        this.log.error('could not obtain attestation evidence', { err: err.message, registered: conn.registered });
        // Not registered yet: try again on a new connection (with backoff). Registered: the
        // gateway asks again later; meanwhile the worker gets no private lease once its evidence lapses.
        if (!conn.registered && !conn.closed) conn.ws.close(1000, 'no attestation evidence');
      },
    );
  }

  /** A private lease's receipt, over its input as leased and its artifacts as uploaded. */
  private async signReceipt(lease: LeaseState, artifacts: ReceiptSubject['artifacts']): Promise<string> {
    const { info } = lease;
    lease.receiptSubject = { run_id: info.run_id, worker_id: this.workerId ?? '', kind: info.kind, input: info.input, artifacts };
    try {
      return await this.signer!.sign(lease.receiptSubject);
    } catch (err) {
      throw Object.assign(new Error(`could not sign the receipt: ${(err as Error).message}`), { code: 'receipt_failed', retryable: true });
    }
  }

  /** A lease resumed on another instance is held by a new worker id: its receipt must name that one. */
  private async resignReceipt(lease: LeaseState): Promise<void> {
    const subject = lease.receiptSubject;
    if (!subject || !lease.finalFrame?.receipt || !this.workerId || subject.worker_id === this.workerId) return;
    subject.worker_id = this.workerId;
    try {
      lease.finalFrame.receipt = await this.signer!.sign(subject);
    } catch (err) {
      this.log.error('could not sign the receipt again after a move; the gateway will refuse it', { lease_id: lease.info.lease_id, err: (err as Error).message });
    }
  }

  private failureOf(lease: LeaseState, err: unknown): FailureReport {
    if (lease.cause === 'canceled') return { code: 'canceled', message: 'canceled by the caller', retryable: false };
    if (lease.cause === 'stopping') return { code: 'worker_stopping', message: 'the worker stopped before finishing', retryable: true };
    if (err instanceof UploadError) return { code: 'upload_failed', message: cut(err.message, MAX_ERROR_MESSAGE), retryable: err.retryable };
    const e = (isRecord(err) ? err : {}) as { code?: unknown; retryable?: unknown; message?: unknown };
    const message = typeof e.message === 'string' && e.message !== '' ? e.message : String(err);
    return {
      code: errorCodeOf(e.code) ?? 'engine_error',
      message: cut(message, MAX_ERROR_MESSAGE),
      retryable: typeof e.retryable === 'boolean' ? e.retryable : true,
    };
  }

  /** Sends the final report (unless the lease is lost or stale) and waits for the gateway's answer. */
  private async report(lease: LeaseState, outcome: Outcome): Promise<void> {
    const { info } = lease;
    if (lease.cause === 'canceled') outcome = { type: 'fail', error: this.failureOf(lease, null) };
    if (lease.cause === 'disconnected' || lease.cause === 'stale' || (lease.conn.closed && !lease.moving)) {
      return this.drop(lease, lease.lostInMove ?? (lease.cause === 'stale' ? 'the gateway said the lease is stale' : 'the connection was lost'));
    }
    let frame: Record<string, unknown> = outcome.type === 'complete' ? { type: 'complete', output: outcome.output, ...(outcome.receipt ? { receipt: outcome.receipt } : {}) } : { type: 'fail', error: outcome.error };
    let text: string | null = null;
    try {
      text = JSON.stringify({ ...frame, lease_id: info.lease_id, fence: info.fence });
    } catch (err) {
      outcome = { type: 'fail', error: { code: 'bad_output', message: `the output is not JSON: ${(err as Error).message}`, retryable: false } };
    }
    if (text !== null && Buffer.byteLength(text) > MAX_REPORT_BYTES) {
      outcome = { type: 'fail', error: { code: 'output_too_large', message: `the output is over ${MAX_REPORT_BYTES} bytes of JSON; return large results as artifacts`, retryable: false } };
    }
    if (outcome.type === 'fail') frame = { type: 'fail', error: outcome.error };

    lease.phase = 'reporting';
    const answer = await new Promise<Answer>((resolve) => {
      lease.onFinalAnswer = (a) => {
        clearTimeout(lease.finalTimer);
        lease.onFinalAnswer = undefined;
        resolve(a);
      };
      lease.finalFrame = frame;
      this.sendFinal(lease);
    });
    lease.phase = 'done';
    this.forget(lease);
    if (answer.ok) {
      if (outcome.type === 'complete') {
        this.log.info('completed', { lease_id: info.lease_id, run_id: info.run_id, kind: info.kind, urls: (outcome.output.urls as string[]).length });
        this.emit('completed', info, outcome.output);
      } else {
        this.log[outcome.error.code === 'canceled' ? 'info' : 'warn']('failed', { lease_id: info.lease_id, run_id: info.run_id, kind: info.kind, code: outcome.error.code, retryable: outcome.error.retryable, message: outcome.error.message });
        this.emit('failed', info, outcome.error);
      }
    } else {
      this.log.warn(`the gateway did not take the ${frame.type} report`, { lease_id: info.lease_id, run_id: info.run_id, code: answer.code, message: answer.message });
      this.emit('dropped', info, `${frame.type} not acknowledged: ${answer.code}: ${answer.message}`);
    }
  }

  /** Sends the final report now, or once the lease is resumed if it is moving; then waits for the answer. */
  private sendFinal(lease: LeaseState): void {
    if (lease.moving) return;
    const frame = lease.finalFrame!;
    clearTimeout(lease.finalTimer);
    // Not before the earlier frames of the lease are answered: one the gateway could not take
    // (`unavailable`) goes again, and behind a final report it already took it would come too
    // late (the lease has ended) and be lost. Waiting costs a round trip at the end of a lease.
    if (lease.unanswered.length > 0 || lease.resend.length > 0) {
      lease.finalHeld = true;
      // An earlier answer that never comes (an error frame without a lease id) holds it no longer than this.
      lease.finalTimer = setTimeout(() => this.sendHeldFinal(lease, true), this.reportTimeoutMs);
      return;
    }
    this.sendHeldFinal(lease, true);
  }

  private sendHeldFinal(lease: LeaseState, now: boolean): void {
    if (lease.moving || (!now && (lease.unanswered.length > 0 || lease.resend.length > 0))) return;
    clearTimeout(lease.finalTimer);
    lease.finalHeld = false;
    const frame = lease.finalFrame!;
    if (!this.sendLease(lease, frame)) return lease.onFinalAnswer?.({ ok: false, code: 'disconnected', message: 'the connection was lost' });
    lease.finalIndex = lease.sent;
    lease.finalType = String(frame.type);
    lease.finalTimer = setTimeout(() => lease.onFinalAnswer?.({ ok: false, code: 'no_answer', message: `no answer from the gateway in ${this.reportTimeoutMs} ms` }), this.reportTimeoutMs);
  }

  /** Sends a lease frame, or holds it while the lease moves to another instance. */
  private sendLease(lease: LeaseState, frame: Record<string, unknown>): boolean {
    if (lease.moving) {
      if (lease.held.length < MAX_HELD_FRAMES) lease.held.push(frame);
      else this.log.warn('too many frames held while moving; dropping one', { lease_id: lease.info.lease_id, type: frame.type });
      return true;
    }
    if (lease.conn.closed) return false;
    if (!this.sendRaw(lease.conn, { ...frame, lease_id: lease.info.lease_id, fence: lease.info.fence })) return false;
    lease.sent++;
    lease.unanswered.push(frame);
    return true;
  }

  /** An ack or an error naming a lease. Answers come in the order the frames were sent. */
  private onAnswer(leaseId: unknown, answer: Answer): void {
    const lease = typeof leaseId === 'string' ? this.leases.get(leaseId) : undefined;
    if (!lease) return;
    lease.answered++;
    const frame = lease.unanswered.shift();
    if (lease.conn.moving) queueMicrotask(() => this.closeWhenAnswered(lease.conn));
    if (!answer.ok && answer.code === 'unavailable' && frame) return this.sendAgainLater(lease, frame);
    lease.outageRetries = 0;
    if (lease.finalHeld && !lease.moving) this.sendHeldFinal(lease, false);
    if (!answer.ok && answer.code === 'stale_lease' && lease.phase !== 'reporting') {
      this.log.warn('the gateway says this lease is stale; dropping its work', { lease_id: lease.info.lease_id, run_id: lease.info.run_id });
      this.abortLease(lease, 'stale');
      if (lease.phase === 'pending') this.drop(lease, 'the gateway said the lease is stale');
      return;
    }
    if (lease.finalIndex === undefined) return;
    // The answer to the final report is the last one; an ack naming it is enough even if an
    // earlier answer went missing (an `internal` error frame carries no lease id).
    if (lease.answered >= lease.finalIndex || (answer.ok && answer.of === lease.finalType)) lease.onFinalAnswer?.(answer);
  }

  /**
   * The gateway could not reach its datastore for this frame (a passing outage): the frame goes
   * again after a pause that grows while the answers stay `unavailable`, until it is answered
   * otherwise. The final report's wait for an answer starts over with it.
   */
  private sendAgainLater(lease: LeaseState, frame: Record<string, unknown>): void {
    const final = frame === lease.finalFrame;
    // An outage does not count against the wait for the final report's answer, held or sent.
    if (final || lease.finalHeld) clearTimeout(lease.finalTimer);
    if (final) lease.finalIndex = undefined;
    lease.resend.push(frame);
    if (lease.resendTimer) return;
    const delay = Math.min(100 * 2 ** lease.outageRetries++, 2_000);
    this.log.warn('the gateway cannot reach its datastore; sending the frames again', { lease_id: lease.info.lease_id, type: frame.type, in_ms: delay });
    const conn = lease.conn;
    lease.resendTimer = setTimeout(() => {
      lease.resendTimer = undefined;
      const frames = lease.resend.splice(0);
      if (this.leases.get(lease.info.lease_id) !== lease || lease.conn !== conn) return;
      // In the order first sent: a log line still arrives before the report that ends the lease.
      for (const f of frames) {
        if (f !== lease.finalFrame) this.sendLease(lease, f);
      }
      // Behind the frames sent again, and only once they are answered.
      if (lease.finalHeld || frames.includes(lease.finalFrame!)) this.sendFinal(lease);
    }, delay);
    conn.timers.push(lease.resendTimer);
  }

  private onErrorFrame(conn: Connection, frame: Record<string, unknown>): void {
    const error: GatewayErrorFrame = { code: String(frame.code ?? 'unknown'), message: String(frame.message ?? '') };
    if (typeof frame.lease_id === 'string') error.lease_id = frame.lease_id;
    this.emit('gateway-error', error);
    if (!conn.registered) {
      conn.refusal = { code: error.code, message: error.message };
      // The gateway closes a refused registration itself (4400/4401/4403), except a malformed
      // register frame, which it lets time out; close soon to surface the reason.
      conn.timers.push(
        setTimeout(() => {
          if (conn.ws.readyState === WebSocket.OPEN) conn.ws.close(1000, 'refused');
        }, 500),
      );
      return;
    }
    if (error.lease_id) return this.onAnswer(error.lease_id, { ok: false, code: error.code, message: error.message });
    this.log.warn('error frame from the gateway', { code: error.code, message: error.message });
  }

  private onCancel(frame: Record<string, unknown>): void {
    const lease = typeof frame.lease_id === 'string' ? this.leases.get(frame.lease_id) : undefined;
    if (!lease) return;
    this.log.info('canceled by the caller', { lease_id: lease.info.lease_id, run_id: lease.info.run_id });
    if (lease.phase === 'pending') {
      lease.cause = 'canceled';
      lease.phase = 'running';
      const i = this.pending.indexOf(lease);
      if (i >= 0) this.pending.splice(i, 1);
      void this.report(lease, { type: 'fail', error: this.failureOf(lease, null) }).then(() => {
        this.checkIdle();
        this.checkStopped();
      });
      return;
    }
    if (lease.phase === 'running') this.abortLease(lease, 'canceled');
  }

  private abortLease(lease: LeaseState, cause: AbortCause): void {
    if (lease.phase === 'done' || lease.phase === 'reporting') return;
    lease.cause ??= cause;
    const messages: Record<AbortCause, string> = {
      canceled: 'the job was canceled',
      stale: 'the lease is no longer held by this worker',
      disconnected: 'the connection to the gateway was lost',
      stopping: 'the worker is stopping',
    };
    if (!lease.controller.signal.aborted) lease.controller.abort(abortError(messages[cause]));
    clearTimeout(lease.progressTimer);
    lease.pendingProgress = null;
  }

  private drop(lease: LeaseState, reason: string): void {
    if (lease.phase === 'done') return;
    lease.phase = 'done';
    const i = this.pending.indexOf(lease);
    if (i >= 0) this.pending.splice(i, 1);
    this.forget(lease);
    this.log.warn('lease dropped', { lease_id: lease.info.lease_id, run_id: lease.info.run_id, reason });
    this.emit('dropped', lease.info, reason);
  }

  private forget(lease: LeaseState): void {
    clearTimeout(lease.progressTimer);
    this.leases.delete(lease.info.lease_id);
    lease.conn.leases.delete(lease.info.lease_id);
  }

  // ---- progress -------------------------------------------------------------------------------

  private progress(lease: LeaseState, p: number, message?: string): void {
    if (lease.phase !== 'running' || lease.cause) return;
    if (typeof p !== 'number' || Number.isNaN(p)) return;
    lease.pendingProgress = { progress: Math.min(1, Math.max(0, p)), ...(typeof message === 'string' ? { message: cut(message, MAX_PROGRESS_MESSAGE) } : {}) };
    if (lease.progressTimer) return;
    const wait = lease.lastProgressAt + this.progressIntervalMs - Date.now();
    if (wait <= 0) this.flushProgress(lease, true);
    else lease.progressTimer = setTimeout(() => this.flushProgress(lease, true), wait);
  }

  /** Sends the latest progress (send) or forgets it (the final report says it all). */
  private flushProgress(lease: LeaseState, send: boolean): void {
    clearTimeout(lease.progressTimer);
    lease.progressTimer = undefined;
    const p = lease.pendingProgress;
    lease.pendingProgress = null;
    if (!send || !p || lease.phase !== 'running' || lease.cause) return;
    lease.lastProgressAt = Date.now();
    this.sendLease(lease, { type: 'progress', ...p });
  }

  // ---- moving to another instance (protocol 2) -------------------------------------------------

  /**
   * The gateway instance is stopping and hands this worker's leases over: once every frame
   * already sent on this socket is answered, close it and register again at the same URL
   * (the load balancer picks another instance), claiming the leases still held. Handlers keep
   * running meanwhile; their frames are held until the lease is resumed.
   */
  private onReconnect(conn: Connection): void {
    if (conn.moving || conn.closed) return;
    conn.moving = true;
    for (const id of conn.leases) {
      const lease = this.leases.get(id);
      if (lease && lease.phase !== 'done') lease.moving = true;
    }
    this.log.info('the gateway asked to reconnect: moving the leases to another instance', { leases: conn.leases.size });
    // Answers that never come (an `internal` error carries no lease id) do not hold the move up.
    conn.timers.push(setTimeout(() => this.closeForMove(conn), MOVE_ANSWER_WAIT_MS));
    this.closeWhenAnswered(conn);
  }

  private closeWhenAnswered(conn: Connection): void {
    if (!conn.moving || conn.closed) return;
    for (const id of conn.leases) {
      const lease = this.leases.get(id);
      if (lease && lease.answered < lease.sent) return;
    }
    this.closeForMove(conn);
  }

  private closeForMove(conn: Connection): void {
    if (conn.closed || conn.ws.readyState !== WebSocket.OPEN) return;
    conn.reconnectNow = true;
    conn.ws.close(1000, 'moving to another instance');
  }

  /** The socket of a moving lease closed: it waits, still running, to be claimed on the next one. */
  private holdForMove(lease: LeaseState): void {
    lease.moving = true;
    // A final report sent but not answered goes out again on the new socket. If the old
    // instance did handle it, the run has ended and the new one does not take the lease back.
    if (lease.phase === 'reporting' && lease.finalIndex !== undefined) {
      clearTimeout(lease.finalTimer);
      lease.finalIndex = undefined;
    }
    lease.sent = 0;
    lease.answered = 0;
    lease.unanswered = [];
    this.moving.add(lease);
    // Past the lease TTL the old instance's lock has lapsed: nobody could take the lease back.
    this.moveDeadline ??= setTimeout(() => this.loseMoves(`not taken back within the lease TTL (${this.leaseTtlMs} ms)`), this.leaseTtlMs);
  }

  /** Applies the new instance's answer to the claims: resumed leases carry on here, the others are lost. */
  private settleMoves(conn: Connection, frame: Record<string, unknown>): void {
    const resumed = new Set(Array.isArray(frame.resumed) ? frame.resumed : []);
    clearTimeout(this.moveDeadline);
    this.moveDeadline = undefined;
    const moves = [...this.moving];
    this.moving.clear();
    let lost = 0;
    for (const lease of moves) {
      lease.moving = false;
      if (!resumed.has(lease.info.lease_id)) {
        lost++;
        this.loseMoved(lease, 'the gateway did not take the lease back');
        continue;
      }
      lease.conn = conn;
      conn.leases.add(lease.info.lease_id);
      for (const held of lease.held.splice(0)) this.sendLease(lease, held);
      if (lease.phase === 'reporting' && lease.finalFrame && lease.finalIndex === undefined) void this.resignReceipt(lease).then(() => this.sendFinal(lease));
    }
    this.log.info('leases moved to another gateway instance', { resumed: moves.length - lost, lost });
  }

  private loseMoves(reason: string): void {
    clearTimeout(this.moveDeadline);
    this.moveDeadline = undefined;
    const moves = [...this.moving];
    this.moving.clear();
    for (const lease of moves) {
      lease.moving = false;
      this.loseMoved(lease, reason);
    }
    this.checkStopped();
  }

  /** A lease that did not survive the move: its handler is aborted and nothing more is reported. */
  private loseMoved(lease: LeaseState, reason: string): void {
    lease.held = [];
    lease.lostInMove = `lost in the move to another gateway instance: ${reason}`;
    this.log.warn('lease lost in the move to another instance', { lease_id: lease.info.lease_id, run_id: lease.info.run_id, reason });
    if (lease.phase === 'pending') return this.drop(lease, lease.lostInMove);
    if (lease.phase === 'reporting') return lease.onFinalAnswer?.({ ok: false, code: 'stale_lease', message: lease.lostInMove });
    this.abortLease(lease, 'stale');
  }

  // ---- stopping and draining ------------------------------------------------------------------

  /** Closes the socket once its work is done: when stopping (held leases go back) or drained. */
  private checkIdle(): void {
    const conn = this.conn;
    if (!conn || conn.closed || !conn.registered) return;
    const ids = [...conn.leases].map((id) => this.leases.get(id)).filter((l): l is LeaseState => !!l);
    if (this.state === 'stopping') {
      if (ids.some((l) => l.phase === 'running' || l.phase === 'reporting')) return;
      this.log.info('closing the connection', { held_back: ids.length });
      conn.ws.close(1000, 'worker stopping');
    } else if (conn.draining && ids.length === 0) {
      conn.reconnectNow = true;
      conn.ws.close(1000, 'drained');
    }
  }

  private checkStopped(): void {
    if (this.state !== 'stopping' || !this.stopping) return;
    if (this.conn && !this.conn.closed) return;
    if (this.busy > 0 || this.moving.size > 0) return;
    this.finishStop();
  }

  private finishStop(err?: Error): void {
    if (this.state === 'stopped') return;
    this.state = 'stopped';
    clearTimeout(this.reconnectTimer);
    if (this.stopping) {
      clearTimeout(this.stopping.abortTimer);
      clearTimeout(this.stopping.giveUpTimer);
    }
    if (this.conn && !this.conn.closed) this.conn.ws.terminate();
    this.loseMoves('the worker stopped');
    for (const lease of [...this.leases.values()]) {
      this.abortLease(lease, 'stopping');
      if (lease.phase === 'pending') this.drop(lease, 'the worker stopped');
    }
    if (this.busy > 0) this.log.warn('stopped with handlers still running (they ignore their abort signal)', { running: this.busy });
    else this.log.info('stopped');
    this.stopping?.resolve();
    this.emit('stopped');
    if (err) this.settleFinished.reject(err);
    else this.settleFinished.resolve();
  }
}
