import WebSocket, { type RawData } from 'ws';
import { MAX_HEARTBEAT_LEASES, SUPERSEDED_CLOSE, SUPERSEDED_CODE, type RegisterFrame, type WorkerFrame } from '../protocol/index.js';
import { isRecord } from './is-record.js';
import { WorkerRefusedError, type EmitWorkerEvent } from './worker-events.js';
import { reconnectDelay } from './reconnect-backoff.js';
import type { WorkerSettings } from './worker-options.js';

// 4409: another live process registered with this worker's identity; reconnecting would retire it in turn.
const FATAL_CLOSE_CODES = new Set([4400, 4401, 4403, SUPERSEDED_CLOSE]);
/** Error codes that, before registration, mean "try again later" rather than "you are refused". */
const TRANSIENT_ERROR_CODES = new Set(['internal', 'unavailable', 'attestation_timeout']);
/** A registration that lasted this long resets the reconnect backoff. */
const STABLE_AFTER_MS = 10_000;

/** A frame from the gateway once it parsed as a JSON object with a type; its fields are still unchecked. */
export type IncomingFrame = Record<string, unknown> & { type: string };

/** One socket to the gateway. A reconnect makes a new one; the leases it carried may outlive it (a move). */
export interface Connection {
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
  /** The socket's last error, to say why a connection attempt failed. */
  lastError?: string;
  /** Closed by us to reconnect at once (after a drain). */
  reconnectNow: boolean;
  /** The gateway sent `reconnect`: its leases move to the next connection (protocol 2). */
  moving: boolean;
  /** The register frame claimed leases (`resume`). */
  claimed: boolean;
  /** The register frame carried an `identity` (protocol 5). */
  identified: boolean;
  /** The protocol version `registered` agreed on (0 before). */
  protocol: number;
}

/**
 * What the connection needs from the worker it belongs to. Whether to reconnect, and what a
 * closed socket means for the leases, is the worker's to decide: the connection only reports.
 */
export interface GatewayConnectionContext {
  /** A running worker connects; so does a stopping one whose leases are moving to another instance. */
  mayConnect(): boolean;
  /** Only a running worker turns a refusal into a stop: a stopping one is on its way out already. */
  isRunning(): boolean;
  /** Made when the socket opens: the leases to claim are known only then. */
  registerFrame(): RegisterFrame;
  onFrame(conn: Connection, frame: IncomingFrame): void;
  /** A binary message: a pipeline frame for a rank lease (protocol 6). */
  onBinary(conn: Connection, data: Buffer): void;
  /** The socket closed: its leases are lost, or held for a move. */
  onSocketClosed(conn: Connection): void;
  /** An instance of protocol 1 refused the `resume` claims: the moving leases cannot be taken back. */
  onClaimRefused(): void;
  /** An instance older than protocol 5 refused the register's `identity`: the next register leaves it out. */
  onIdentityRefused(): void;
  /** Leases waiting to be claimed on the next connection: while there are any, retries are quick. */
  movingLeases(): number;
  nextMoveDelay(): number;
  /** The gateway refused the worker for good. */
  onRefused(err: WorkerRefusedError): void;
  /** No reconnect follows: the worker may have finished stopping. */
  checkStopped(): void;
  emit: EmitWorkerEvent;
}

/**
 * The worker's link to the gateway: opens the socket with the token, registers, keeps it alive
 * with heartbeats, reads frames, and after a close classifies the refusal and reconnects with
 * backoff. It knows sockets, not leases.
 */
export class GatewayConnection {
  /** The socket in use; null between sockets. */
  current: Connection | null = null;
  private failedTries = 0;
  private reconnectTimer?: NodeJS.Timeout;

  constructor(
    private readonly settings: WorkerSettings,
    private readonly ctx: GatewayConnectionContext,
  ) {}

  open(): void {
    if (!this.ctx.mayConnect()) return;
    const { url, token, webSocket, log } = this.settings;
    const ws = new WebSocket(url, {
      handshakeTimeout: 15_000,
      ...webSocket,
      headers: { ...(webSocket?.headers ?? {}), authorization: `Bearer ${token}` },
    });
    const conn: Connection = { ws, registered: false, closed: false, draining: false, heartbeatMs: 5_000, timers: [], lastPong: Date.now(), leases: new Set(), reconnectNow: false, moving: false, claimed: false, identified: false, protocol: 0 };
    this.current = conn;
    log.debug('connecting', { url });

    ws.on('open', () => {
      const frame = this.ctx.registerFrame();
      conn.claimed = (frame.resume?.length ?? 0) > 0;
      conn.identified = frame.identity !== undefined;
      this.send(conn, frame);
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
      if (isBinary) {
        try {
          return this.ctx.onBinary(conn, Array.isArray(data) ? Buffer.concat(data) : Buffer.isBuffer(data) ? data : Buffer.from(data));
        } catch (err) {
          return log.error('could not handle a binary frame from the gateway', { err: (err as Error).message });
        }
      }
      let frame: unknown;
      try {
        frame = JSON.parse(data.toString('utf8'));
      } catch {
        return log.warn('ignoring a frame from the gateway that is not JSON');
      }
      if (!isRecord(frame) || typeof frame.type !== 'string') return log.warn('ignoring a frame from the gateway without a type');
      try {
        this.ctx.onFrame(conn, frame as IncomingFrame);
      } catch (err) {
        log.error('could not handle a frame from the gateway', { type: frame.type, err: (err as Error).message });
      }
    });
    ws.on('error', (err) => {
      if (!conn.refusal) log.debug('socket error', { err: err.message });
      conn.lastError = err.message;
    });
    ws.on('close', (code, reason) => this.onClose(conn, code, reason.toString('utf8')));
  }

  send(conn: Connection, frame: WorkerFrame): boolean {
    if (conn.closed || conn.ws.readyState !== WebSocket.OPEN) return false;
    conn.ws.send(JSON.stringify(frame));
    return true;
  }

  /** Sends a binary message (a rank's pipeline frame); resolves once it is written to the socket, rejects if the socket is closed. */
  sendBinary(conn: Connection, data: Buffer): Promise<void> {
    if (conn.closed || conn.ws.readyState !== WebSocket.OPEN) return Promise.reject(new Error('the connection to the gateway is closed'));
    return new Promise((resolve, reject) => conn.ws.send(data, { binary: true }, (err) => (err ? reject(err) : resolve())));
  }

  /** The gateway took the registration: heartbeats start, and once it holds a while the backoff starts over. */
  registered(conn: Connection, heartbeatMs: number): void {
    conn.registered = true;
    conn.heartbeatMs = heartbeatMs;
    conn.lastPong = Date.now();
    conn.timers.push(setInterval(() => this.heartbeat(conn), heartbeatMs));
    conn.timers.push(setTimeout(() => (this.failedTries = 0), STABLE_AFTER_MS));
  }

  /** An error frame before registration: the reason the socket is about to be refused. */
  refused(conn: Connection, refusal: { code: string; message: string }): void {
    conn.refusal = refusal;
    // The gateway closes a refused registration itself (4400/4401/4403), except a malformed
    // register frame, which it lets time out; close soon to surface the reason.
    conn.timers.push(
      setTimeout(() => {
        if (conn.ws.readyState === WebSocket.OPEN) conn.ws.close(1000, 'refused');
      }, 500),
    );
  }

  cancelReconnect(): void {
    clearTimeout(this.reconnectTimer);
  }

  private heartbeat(conn: Connection): void {
    if (conn.closed) return;
    // The gateway answers pings (and every report); a silent one over three beats is gone.
    if (Date.now() - conn.lastPong > 3 * conn.heartbeatMs + 1_000) {
      this.settings.log.warn('the gateway stopped answering; reconnecting');
      conn.ws.terminate();
      return;
    }
    this.send(conn, { type: 'heartbeat', leases: [...conn.leases].slice(0, MAX_HEARTBEAT_LEASES) });
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
    if (this.current === conn) this.current = null;
    this.ctx.onSocketClosed(conn);
    conn.leases.clear();

    const { log } = this.settings;
    const refusal = conn.refusal;
    // An older instance refuses a register with fields it does not know as a bad frame:
    // `identity` (before protocol 5) is left out of the next register first, then `resume`
    // (protocol 1): those leases cannot move there (they lapse and are requeued).
    const claimRefused = (conn.claimed || conn.identified) && !conn.registered && refusal?.code === 'bad_frame';
    if (claimRefused) {
      if (conn.identified) this.ctx.onIdentityRefused();
      else this.ctx.onClaimRefused();
      conn.reconnectNow = true;
    }
    const fatal =
      !claimRefused &&
      (FATAL_CLOSE_CODES.has(code) ||
      (refusal?.status !== undefined && (refusal.status === 401 || refusal.status === 403)) ||
      (!!refusal && refusal.status === undefined && !conn.registered && !TRANSIENT_ERROR_CODES.has(refusal.code)));
    if (fatal && this.ctx.isRunning()) {
      const status = refusal?.status ?? code;
      const err = new WorkerRefusedError(
        `the gateway refused this worker (${status}${refusal ? ` ${refusal.code}` : ''}): ${refusal?.message ?? (reason || 'no reason given')}`,
        refusal?.code ?? (code === SUPERSEDED_CLOSE ? SUPERSEDED_CODE : 'refused'),
        status,
      );
      log.error(err.message);
      this.ctx.emit('disconnected', { code, reason, reconnectInMs: null });
      this.ctx.onRefused(err);
      return;
    }
    if (this.ctx.mayConnect()) {
      const delay = conn.reconnectNow ? 0 : this.ctx.movingLeases() > 0 ? this.ctx.nextMoveDelay() : this.nextDelay();
      const why = refusal?.message ?? conn.lastError ?? (reason || `close code ${code}`);
      if (conn.moving) log.info('reconnecting to move the leases', { leases: this.ctx.movingLeases() });
      else if (conn.registered) log.warn('disconnected from the gateway', { code, reason: why, reconnect_in_ms: Math.round(delay) });
      else log.warn('could not connect to the gateway', { reason: why, retry_in_ms: Math.round(delay) });
      this.ctx.emit('disconnected', { code, reason: reason || why, reconnectInMs: delay });
      this.reconnectTimer = setTimeout(() => this.open(), delay);
    } else {
      this.ctx.emit('disconnected', { code, reason, reconnectInMs: null });
      this.ctx.checkStopped();
    }
  }

  private nextDelay(): number {
    // Full jitter (reconnect-backoff.ts), so a fleet does not reconnect in step.
    return reconnectDelay(this.settings.backoff, this.failedTries++);
  }
}
