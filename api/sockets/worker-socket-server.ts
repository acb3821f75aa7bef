import { bearerToken } from '../services/auth/bearer.js';
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { WebSocketServer, type RawData, type WebSocket } from 'ws';
import type { Logger } from 'pino';
import { hashSecret, lookupIdOf, sameHash } from '../../models/credentials.js';
import { toApiError, UnauthorizedError } from '../../models/errors.js';
import { errorFrame, isUnexpected, refuseUpgrade } from './socket-errors.js';
import type { OperatorStore, WorkerTokenStore } from '../../models/stores.js';
import { BATCH_ACK_PROTOCOL, MAX_FRAME_BYTES, WORKER_PATH, type GatewayFrame, type WorkerFrame } from '../../sdk/protocol/index.js';
import { FrameError, frameTooNew, parseFrame } from '../../dispatch/worker-frames.js';
import { WorkerSession, type Admission, type TokenOwner, type WorkerRefusal, type WorkerSessionDeps } from '../../dispatch/worker-session.js';
import { PendingOutputs } from './pending-outputs.js';
import { turnSender } from './turn-sender.js';

export interface WorkerSocketServerOptions extends WorkerSessionDeps {
  workerTokens: WorkerTokenStore;
  operators: OperatorStore;
  log: Logger;
  /** A socket must register within this long. @defaultValue 10000 */
  registerTimeoutMs?: number;
}

/**
 * The fleet's door, a transport only: authenticates a worker token at the WebSocket upgrade,
 * reads each socket's frames in order and checks their shape (dispatch/worker-frames.ts), hands
 * them to the connection's `WorkerSession` (dispatch/worker-session.ts), which decides what they
 * mean, and sends what it answers. A bad frame gets an `error` frame back and touches nothing
 * else; a socket that does not register in time, or goes silent for three heartbeats, is closed.
 */
export class WorkerSocketServer {
  private readonly wss = new WebSocketServer({ noServer: true, maxPayload: MAX_FRAME_BYTES });

  constructor(private readonly opts: WorkerSocketServerOptions) {}

  /** Open worker sockets, registered or not yet. */
  get size(): number {
    return this.wss.clients.size;
  }

  /** For the HTTP server's 'upgrade' event; answers only the worker path. */
  handleUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer): boolean {
    if (new URL(req.url ?? '/', 'http://x').pathname !== WORKER_PATH) return false;
    void this.authenticate(req.headers.authorization).then(
      (owner) => {
        if (!owner) return refuseUpgrade(socket, new UnauthorizedError('a valid worker token is required: Authorization: Bearer swt_...'));
        this.wss.handleUpgrade(req, socket, head, (ws) => this.accept(ws, owner));
      },
      (err) => {
        this.opts.log.warn({ err }, 'worker authentication failed');
        refuseUpgrade(socket, toApiError(err));
      },
    );
    return true;
  }

  private async authenticate(header: string | undefined): Promise<TokenOwner | null> {
    const token = bearerToken(header);
    const lookupId = token ? lookupIdOf('swt', token) : null;
    if (!token || !lookupId) return null;
    const record = await this.opts.workerTokens.findByLookupId(lookupId);
    if (!record || record.revoked_at || !sameHash(hashSecret(token), record.hash)) return null;
    if (record.owner.type === 'account') return { owner: record.owner, trust: 'open' };
    // An operator's trust is read at every connect: vetting or revoking it applies to new sockets at once.
    const operator = await this.opts.operators.get(record.owner.id);
    return operator ? { owner: record.owner, trust: operator.trust } : null;
  }

  private accept(ws: WebSocket, owner: TokenOwner): void {
    const send = turnSender<GatewayFrame>(ws);
    // Paused by back-pressure (a rank sending faster than the next takes): not silent, just unread.
    let paused = false;
    const session = new WorkerSession(this.opts, owner, {
      send,
      close: (code, reason) => ws.close(code, reason),
      sendBinary: (data, written) => (ws.readyState === ws.OPEN ? ws.send(data, { binary: true }, written) : written(new Error('the socket is closed'))),
      pause: () => {
        paused = true;
        ws.pause();
      },
      resume: () => {
        paused = false;
        lastSeen = Date.now();
        ws.resume();
      },
    });
    let lastSeen = Date.now();
    // Closed for silence: its lost leases count as missed heartbeats, not as a disconnect.
    let silent = false;
    const registerTimer = setTimeout(() => ws.close(4400, 'register within 10 s'), this.opts.registerTimeoutMs ?? 10_000);
    const hb = this.opts.dispatcher.heartbeatMs;
    const silence = setInterval(() => {
      // Gathering evidence may take the worker a while, silent: the nonce's life bounds it instead.
      if (!session.attesting && !paused && Date.now() - lastSeen > 3 * hb) {
        silent = true;
        ws.terminate();
      }
    }, hb);

    // Frames of one socket are handled one after another, in the order they were sent
    // (outputs only wait to be queued for the log: `pending` holds their answers).
    let chain: Promise<void> = Promise.resolve();
    const pending = new PendingOutputs(send, () => (session.worker?.protocol ?? 1) >= BATCH_ACK_PROTOCOL);
    ws.on('message', (data: RawData, isBinary: boolean) => {
      lastSeen = Date.now();
      // A rank's activations: forwarded at once, not behind the JSON frames' answers.
      if (isBinary && session.worker) {
        const refused = this.opts.dispatcher.pipelineFrame(session.worker, Buffer.isBuffer(data) ? data : Array.isArray(data) ? Buffer.concat(data) : Buffer.from(data));
        if (refused) send(refused);
        return;
      }
      const text = isBinary ? null : data.toString('utf8');
      chain = chain.then(() =>
        this.onFrame(text, session, ws, send, pending).then(
          () => {
            if (session.worker || session.attesting) clearTimeout(registerTimer);
          },
          (err) => {
            if (isUnexpected(err)) this.opts.log.warn({ err }, 'worker frame failed');
            send(errorFrame(err) as GatewayFrame);
          },
        ),
      );
    });
    ws.on('close', () => {
      clearTimeout(registerTimer);
      clearInterval(silence);
      // After the frames already received: a report sent just before the close is handled, and
      // a worker moving to another instance has its leases handed over only once it is quiet.
      chain = chain.then(async () => {
        await pending.all();
        await session.end(silent);
      });
    });
    ws.on('error', () => ws.terminate());
  }

  /** Parses one frame and hands it to the session; sends its answer. */
  private async onFrame(text: string | null, session: WorkerSession, ws: WebSocket, send: (f: GatewayFrame) => void, pending: PendingOutputs): Promise<void> {
    let frame: WorkerFrame;
    try {
      if (text === null) throw new FrameError('bad_frame', 'frames are JSON text, not binary');
      frame = parseFrame(text);
    } catch (err) {
      if (!(err instanceof FrameError)) throw err;
      send({ type: 'error', code: err.code, message: err.message, ...(err.details ? { details: err.details } : {}) });
      // Before registration the only frame that makes sense is register: a bad one ends the socket.
      if (!session.worker) ws.close(4400, 'bad register frame');
      return;
    }
    if (frame.type === 'register') {
      if (session.worker || session.attesting) return send({ type: 'error', code: 'bad_frame', message: 'already registered' });
      return this.admitted(await session.admit(frame), session, ws, send);
    }
    if (frame.type === 'attestation') {
      const admission = await session.attestation(frame.evidence, frame.nonce);
      return admission ? this.admitted(admission, session, ws, send) : undefined;
    }
    const worker = session.worker;
    if (!worker) {
      send({ type: 'error', code: 'not_registered', message: 'send register first' });
      ws.close(4400, 'not registered');
      return;
    }
    const tooNew = frameTooNew(frame.type, worker.protocol ?? 1);
    if (tooNew) return send({ type: 'error', code: 'bad_frame', of: frame.type, message: tooNew });
    switch (frame.type) {
      case 'models':
        return send(await session.models(frame.models));
      case 'backend':
        return session.backend(frame.available, frame.message);
      case 'heartbeat':
        return session.heartbeat();
      case 'output':
        pending.add(frame.lease_id, session.report(frame));
        if (pending.full) await pending.all();
        return;
      default: {
        await pending.settled(frame.lease_id);
        const answer = await session.report(frame);
        pending.flush(frame.lease_id);
        send(answer);
      }
    }
  }

  /** Renders an admission: `registered` then the attach, or the refusal and its close. */
  private async admitted(admission: Admission, session: WorkerSession, ws: WebSocket, send: (f: GatewayFrame) => void): Promise<void> {
    if ('attesting' in admission) return;
    const refuse = (r: WorkerRefusal) => {
      send(r.error);
      ws.close(r.close, r.reason);
    };
    if ('refusal' in admission) return refuse(admission.refusal);
    send(admission.registered);
    const failed = await session.start(admission.worker);
    if (failed) refuse(failed);
  }

  close(): void {
    for (const ws of this.wss.clients) ws.terminate();
    this.wss.close();
  }
}
