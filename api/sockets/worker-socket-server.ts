import { bearerToken } from '../services/auth/bearer.js';
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { ulid } from 'ulid';
import { WebSocketServer, type RawData, type WebSocket } from 'ws';
import type { Logger } from 'pino';
import { hashSecret, lookupIdOf, sameHash } from '../../models/credentials.js';
import { isDatastoreUnavailable, toApiError, UnauthorizedError } from '../../models/errors.js';
import { errorFrame, isUnexpected, refuseUpgrade } from './socket-errors.js';
import type { OperatorStore, WorkerTokenStore } from '../../models/stores.js';
import type { OperatorTrust } from '../../models/types.js';
import { KIND_NAMES } from '../../models/kinds.js';
import { TIER_RANK, workerIdentityKey, type ConnectedWorker } from '../../dispatch/connected-worker.js';
import type { Dispatcher } from '../../dispatch/dispatcher.js';
import { privateWorkerTiers, type PrivateRegistrations } from '../../dispatch/private-registration.js';
import type { TrustEnforcer } from '../../dispatch/trust-enforcer.js';
import type { Evidence } from '../../sdk/attestation/index.js';
import { BATCH_ACK_PROTOCOL, HANDOVER_PROTOCOL, MAX_FRAME_BYTES, PROTOCOL_VERSIONS, WORKER_PATH, type GatewayFrame, type RegisterFrame, type WorkerFrame, type WorkerModels } from '../../sdk/protocol/index.js';
import { checkWorkerModels, WorkerModelsError } from '../../dispatch/worker-models.js';
import { FrameError, frameTooNew, parseFrame, registerFieldTooNew } from '../../dispatch/worker-frames.js';
import { PendingOutputs } from './pending-outputs.js';
import { turnSender } from './turn-sender.js';

export interface WorkerSocketServerOptions {
  dispatcher: Dispatcher;
  workerTokens: WorkerTokenStore;
  operators: OperatorStore;
  gatewayId: string;
  log: Logger;
  /** A socket must register within this long. @defaultValue 10000 */
  registerTimeoutMs?: number;
  /** Registers private workers once their evidence checks out; with no verifier configured they are refused. */
  attestation: PrivateRegistrations;
  /** Applies operator trust changes to the workers registered on every instance. */
  trust: TrustEnforcer;
}

interface TokenOwner {
  owner: { type: 'operator' | 'account'; id: string };
  trust: OperatorTrust;
}

/**
 * The fleet's door: authenticates a worker token at the WebSocket upgrade, waits for the
 * `register` frame, then turns frames into dispatcher calls. A bad frame gets an `error`
 * frame back and touches nothing else; a silent socket is closed after three heartbeats.
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
    let worker: ConnectedWorker | null = null;
    let lastSeen = Date.now();
    // Closed for silence: its lost leases count as missed heartbeats, not as a disconnect.
    let silent = false;
    // Gathering evidence may take the worker a while, silent: the nonce's life bounds it instead.
    let attesting = false;
    const registerTimer = setTimeout(() => ws.close(4400, 'register within 10 s'), this.opts.registerTimeoutMs ?? 10_000);
    const hb = this.opts.dispatcher.heartbeatMs;
    const silence = setInterval(() => {
      if (!attesting && Date.now() - lastSeen > 3 * hb) {
        silent = true;
        ws.terminate();
      }
    }, hb);

    // Frames of one socket are handled one after another, in the order they were sent
    // (outputs only wait to be queued for the log: `pending` holds their answers).
    let chain: Promise<void> = Promise.resolve();
    const pending = new PendingOutputs(send, () => (worker?.protocol ?? 1) >= BATCH_ACK_PROTOCOL);
    ws.on('message', (data: RawData, isBinary: boolean) => {
      lastSeen = Date.now();
      const text = isBinary ? null : data.toString('utf8');
      chain = chain.then(() =>
        this.onFrame(text, owner, worker, send, ws, pending).then(
          (w) => {
            if (w) {
              attesting = w === 'attesting';
              if (w !== 'attesting') worker = w;
              clearTimeout(registerTimer);
            }
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
      this.opts.attestation.abandon(ws);
      // After the frames already received: a report sent just before the close is handled, and
      // a worker moving to another instance has its leases handed over only once it is quiet.
      chain = chain.then(async () => {
        await pending.all();
        if (worker) return this.opts.dispatcher.detach(worker, 1000, 'bye', silent ? 'heartbeat' : 'disconnect');
      });
    });
    ws.on('error', () => ws.terminate());
  }

  /** Handles one frame; returns the worker when this frame registered it, 'attesting' when it asked a private worker for evidence. */
  private async onFrame(
    text: string | null,
    owner: TokenOwner,
    worker: ConnectedWorker | null,
    send: (f: GatewayFrame) => void,
    ws: WebSocket,
    pending: PendingOutputs,
  ): Promise<ConnectedWorker | 'attesting' | null> {
    let frame;
    try {
      if (text === null) throw new FrameError('bad_frame', 'frames are JSON text, not binary');
      frame = parseFrame(text);
    } catch (err) {
      if (!(err instanceof FrameError)) throw err;
      send({ type: 'error', code: err.code, message: err.message, ...(err.details ? { details: err.details } : {}) });
      // Before registration the only frame that makes sense is register: a bad one ends the socket.
      if (!worker) ws.close(4400, 'bad register frame');
      return null;
    }
    if (frame.type === 'attestation') return this.onAttestation(frame.evidence, owner, worker, send, ws, frame.nonce);
    if (frame.type === 'register') {
      if (worker || this.opts.attestation.waiting(ws)) {
        send({ type: 'error', code: 'bad_frame', message: 'already registered' });
        return null;
      }
      return this.register(frame, owner, send, ws);
    }
    if (!worker) {
      send({ type: 'error', code: 'not_registered', message: 'send register first' });
      ws.close(4400, 'not registered');
      return null;
    }
    const tooNew = frameTooNew(frame.type, worker.protocol ?? 1);
    if (tooNew) {
      send({ type: 'error', code: 'bad_frame', of: frame.type, message: tooNew });
      return null;
    }
    if (frame.type === 'models') {
      await this.onModels(worker, frame.models, send);
      return null;
    }
    if (frame.type === 'backend') {
      this.opts.dispatcher.setBackend(worker, frame.available, frame.message);
      return null;
    }
    if (frame.type === 'heartbeat') {
      // Heartbeats get no answer; one lost to a datastore outage is made up by the next.
      await this.opts.dispatcher.heartbeat(worker).catch((err: unknown) => {
        if (!isDatastoreUnavailable(err)) throw err;
        this.opts.log.debug({ err, workerId: worker.info.worker_id }, 'heartbeat not recorded: the datastore is unavailable');
      });
      return null;
    }
    if (frame.type === 'output') {
      pending.add(frame.lease_id, this.answerReport(worker, frame));
      if (pending.full) await pending.all();
      return null;
    }
    await pending.settled(frame.lease_id);
    const answer = await this.answerReport(worker, frame);
    pending.flush(frame.lease_id);
    send(answer);
    return null;
  }

  /**
   * Hands a lease frame to the dispatcher (at once: an output is queued for the log before
   * this returns) and resolves with its answer; never rejects.
   */
  private async answerReport(worker: ConnectedWorker, frame: Extract<WorkerFrame, { lease_id: string }>): Promise<GatewayFrame> {
    let refused;
    try {
      refused = await this.opts.dispatcher.report(worker, frame);
    } catch (err) {
      // Every lease frame gets its answer, naming its lease and frame type so the worker can
      // match it: `unavailable` (a datastore outage) asks the worker to send the frame again.
      const unavailable = toApiError(err).code === 'unavailable';
      this.opts.log.warn({ err, leaseId: frame.lease_id, of: frame.type }, unavailable ? 'worker report deferred: the datastore is unavailable' : 'worker report failed');
      return unavailable
        ? { type: 'error', code: 'unavailable', lease_id: frame.lease_id, of: frame.type, retryable: true, message: 'the gateway cannot reach its datastore: send this frame again' }
        : { type: 'error', code: 'internal', lease_id: frame.lease_id, of: frame.type, retryable: false, message: 'the gateway could not handle this frame' };
    }
    return refused ? { type: 'error', lease_id: frame.lease_id, of: frame.type, ...refused } : { type: 'ack', lease_id: frame.lease_id, of: frame.type };
  }

  /**
   * Protocol 3: a registered worker's new model list. Refused (`bad_models`, naming what is
   * wrong) it keeps its current list; accepted it is in force before `models_accepted`.
   */
  private async onModels(worker: ConnectedWorker, models: WorkerModels, send: (f: GatewayFrame) => void): Promise<void> {
    let checked: WorkerModels;
    try {
      checked = checkWorkerModels(models, worker.info.kinds);
    } catch (err) {
      if (!(err instanceof WorkerModelsError)) throw err;
      send({ type: 'error', code: err.code, of: 'models', message: err.message, details: { path: err.path } });
      return;
    }
    try {
      await this.opts.dispatcher.setModels(worker, checked);
    } catch (err) {
      const unavailable = toApiError(err).code === 'unavailable';
      this.opts.log.warn({ err, workerId: worker.info.worker_id }, 'could not record a worker\'s models');
      send({ type: 'error', code: unavailable ? 'unavailable' : 'internal', of: 'models', retryable: unavailable, message: unavailable ? 'the gateway cannot reach its datastore: send the models frame again' : 'the gateway could not take the model list' });
      return;
    }
    send({ type: 'models_accepted' });
  }

  /**
   * Evidence from a private worker: completes its registration (refused: close 4403), or
   * refreshes a registered worker's evidence (refused: it keeps serving its other tiers).
   */
  private async onAttestation(
    evidence: Evidence,
    owner: TokenOwner,
    worker: ConnectedWorker | null,
    send: (f: GatewayFrame) => void,
    ws: WebSocket,
    nonce?: string,
  ): Promise<ConnectedWorker | null> {
    const gate = this.opts.attestation;
    const waiting = gate.waiting(ws);
    const attesting = waiting?.worker ?? (worker?.attestation ? worker : null);
    if (!attesting) {
      send({ type: 'error', code: 'bad_frame', message: 'attestation frames answer the attest nonces of private workers' });
      if (!worker) ws.close(4400, 'not registered');
      return null;
    }
    const accepted = await gate.answer(attesting, evidence, send, nonce);
    if (!waiting) {
      if (accepted) send({ type: 'attested', expires_at: attesting.attestation!.current!.expires_at });
      return null;
    }
    if (!accepted) {
      ws.close(4403, 'attestation failed');
      return null;
    }
    // Registration resumes with the attested worker, re-reading the token's trust on the way.
    const registered = await this.register(waiting.frame, owner, send, ws, waiting.worker);
    if (!registered || registered === 'attesting') return null;
    gate.settled(ws);
    return registered;
  }

  private async register(frame: RegisterFrame, owner: TokenOwner, send: (f: GatewayFrame) => void, ws: WebSocket, attested?: ConnectedWorker): Promise<ConnectedWorker | 'attesting' | null> {
    const version = Math.max(...frame.protocol.filter((v) => (PROTOCOL_VERSIONS as readonly number[]).includes(v)));
    if (!Number.isFinite(version)) {
      send({ type: 'error', code: 'bad_frame', message: `no common protocol version; the gateway speaks ${PROTOCOL_VERSIONS.join(', ')}` });
      ws.close(4400, 'protocol');
      return null;
    }
    if (frame.tier === 'private' && !this.opts.attestation.enabled) {
      send({ type: 'error', code: 'forbidden', message: 'private workers must present attestation evidence, and this gateway has no attestation verifier configured (ATTESTATION_JWKS)' });
      ws.close(4403, 'attestation required');
      return null;
    }
    const fieldTooNew = registerFieldTooNew(frame, version);
    if (fieldTooNew) {
      send({ type: 'error', code: 'bad_frame', message: fieldTooNew });
      ws.close(4400, 'bad register frame');
      return null;
    }
    const kinds = frame.kinds.includes('all') ? [...KIND_NAMES] : frame.kinds;
    let models: WorkerModels = {};
    try {
      models = checkWorkerModels(frame.models ?? {}, kinds);
    } catch (err) {
      if (!(err instanceof WorkerModelsError)) throw err;
      send({ type: 'error', code: err.code, message: err.message, details: { path: err.path } });
      ws.close(4400, 'bad register frame');
      return null;
    }
    if (frame.tier === 'private' && !frame.receipt_key) {
      send({ type: 'error', code: 'bad_frame', message: 'a private worker registers with receipt_key: the EC P-384 public JWK its receipts verify with' });
      ws.close(4400, 'bad register frame');
      return null;
    }
    // Read again: a socket may have waited since connect, across a demotion its instance has already handled.
    if (owner.owner.type === 'operator') owner = { ...owner, trust: (await this.opts.operators.get(owner.owner.id))?.trust ?? 'open' };
    // Private rests on attestation, not on the token's trust (which sets the lower tiers it serves).
    if (frame.tier !== 'private' && TIER_RANK[frame.tier] > TIER_RANK[owner.trust]) {
      send({ type: 'error', code: 'forbidden', message: `this token's trust is ${owner.trust}; it cannot register a ${frame.tier} worker` });
      ws.close(4403, 'tier not allowed');
      return null;
    }
    const worker: ConnectedWorker = attested ?? {
      info: {
        worker_id: `wkr_${ulid()}`,
        kinds,
        tier: frame.tier,
        slots: frame.slots,
        busy: 0,
        gateway_id: this.opts.gatewayId,
        owner: owner.owner,
        hardware: frame.hardware ?? {},
        software: frame.software ?? {},
        models,
        connected_at: new Date().toISOString(),
      },
      queues: [],
      send,
      close: (code, reason) => ws.close(code, reason),
      leases: new Set(),
      cursor: 0,
      filling: false,
      refill: false,
      draining: false,
      protocol: version,
      ...(frame.identity !== undefined ? { identity: workerIdentityKey(owner.owner, frame.identity) } : {}),
    };
    if (frame.tier === 'private') {
      worker.tiers = privateWorkerTiers(owner.trust);
      // Evidence first: registration (and adopting any leases it brings) waits for it.
      if (!attested) {
        await this.opts.attestation.begin(ws, worker, frame, send);
        return 'attesting';
      }
    }
    // Protocol 5: its older connection, here or on any instance, is retired before this one counts.
    await this.opts.dispatcher.claimIdentity(worker);
    // Protocol 2: leases brought from a stopping instance are adopted before any new one is offered.
    const moved = version >= HANDOVER_PROTOCOL ? await this.opts.dispatcher.adopt(worker, frame.resume ?? []) : null;
    send({
      type: 'registered',
      worker_id: worker.info.worker_id,
      protocol: version,
      heartbeat_ms: this.opts.dispatcher.heartbeatMs,
      lease_ttl_ms: this.opts.dispatcher.leaseTtlMs,
      ...(worker.attestation?.current ? { attestation: { expires_at: worker.attestation.current.expires_at } } : {}),
      ...(moved ?? {}),
    });
    try {
      await this.opts.dispatcher.attach(worker);
      // A demotion announced between the read above and the attach found no worker to close here: check once more.
      if (owner.owner.type === 'operator' && worker.info.tier !== 'open') await this.opts.trust.enforce(owner.owner.id);
    } catch (err) {
      // Told `registered` already: no ghost left attached; the worker reconnects (1011 is retryable).
      this.opts.log.warn({ err, workerId: worker.info.worker_id }, 'attaching a worker failed; closing it');
      await this.opts.dispatcher.detach(worker, 1011, 'registration failed; reconnect');
      ws.close(1011, 'registration failed; reconnect');
      return null;
    }
    return worker;
  }

  close(): void {
    for (const ws of this.wss.clients) ws.terminate();
    this.wss.close();
  }
}
