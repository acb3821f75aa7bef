import { EventEmitter } from 'node:events';
import { BACKEND_STATE_PROTOCOL, IDENTITY_PROTOCOL, MODELS_PROTOCOL, PROTOCOL_VERSIONS, SUPERSEDED_CODE, type RegisterFrame, type RegisteredInfo, type Tier, type WorkerFrame, type WorkerModels } from '../protocol/index.js';
import { ReceiptSigner } from './attestation.js';
import { BackendWatch } from './backend-watch.js';
import { GatewayConnection, type Connection, type IncomingFrame } from './gateway-connection.js';
import { isRecord } from './is-record.js';
import { LeaseMover } from './lease-mover.js';
import { LeaseRunner } from './lease-runner.js';
import type { LeaseState } from './lease-state.js';
import { routePipelineFrame } from './rank-stream.js';
import { WorkerAttestation } from './worker-attestation.js';
import type { EmitWorkerEvent, GatewayErrorFrame, SwitchyardWorkerEvents, WorkerRefusedError } from './worker-events.js';
import { checkWorkerModels } from './worker-models.js';
import { resolveWorkerOptions, type SwitchyardWorkerOptions, type WorkerSettings } from './worker-options.js';

// What this module exported before it was split, so imports of it keep working.
export { PROTOCOL_VERSIONS, WORKER_PATH, workerSocketUrl, type FailureReport, type LeaseInfo, type RegisteredInfo, type Tier } from '../protocol/index.js';
export { SDK_VERSION, type KindHandler, type ReconnectOptions, type SwitchyardWorkerOptions, type WorkerHandler } from './worker-options.js';
export { WorkerRefusedError, type DisconnectInfo, type GatewayErrorFrame, type SwitchyardWorkerEvents } from './worker-events.js';

/**
 * A worker process of the Switchyard fleet: connects out to a gateway over the worker protocol
 * (docs/worker-protocol.md), runs the leases it is given with your handler, uploads the
 * artifacts and reports the outcome. Reconnects on its own; `stop()` lets running work finish.
 *
 * This class holds the worker's lifecycle (start, stop, refusal) and routes the gateway's
 * frames; the work is done by its pieces: GatewayConnection (the socket), LeaseRunner (running
 * and reporting leases), LeaseMover (leases moving to another gateway instance, working on the
 * runner's lease table) and WorkerAttestation (the private tier). They reach the worker, and
 * so each other, only through the small contexts built here: the lifecycle decisions (whether
 * to connect, start a lease, or finish stopping) stay in one place.
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
  /** The gateway's id for the current registration. */
  workerId: string | null = null;
  /** The protocol version of the current connection (0 before the first register). */
  private protocol = 0;

  private readonly settings: WorkerSettings;
  private readonly connection: GatewayConnection;
  private readonly runner: LeaseRunner;
  private readonly mover: LeaseMover;
  private readonly attestation: WorkerAttestation;
  private readonly backend: BackendWatch;
  /** A gateway older than protocol 5 refused `identity` in the register: it is left out from then on. */
  private identityRefused = false;
  private state: 'idle' | 'running' | 'stopping' | 'stopped' = 'idle';
  private started?: { resolve: () => void; reject: (err: Error) => void };
  private stopping?: { promise: Promise<void>; resolve: () => void; abortTimer?: NodeJS.Timeout; giveUpTimer?: NodeJS.Timeout; forced: boolean };
  private readonly finished: Promise<void>;
  private settleFinished!: { resolve: () => void; reject: (err: Error) => void };

  constructor(opts: SwitchyardWorkerOptions) {
    super();
    const settings = (this.settings = resolveWorkerOptions(opts));
    this.url = settings.url;
    this.kinds = settings.kinds;
    this.tier = settings.tier;
    this.slots = settings.slots;
    const signer = opts.attestation ? new ReceiptSigner(opts.attestation) : undefined;
    // The generic signature of the pieces is the same as the emitter's; TypeScript cannot see it through the spread.
    const emit: EmitWorkerEvent = (event, ...args) => void this.emit(event, ...(args as never));
    const send = (conn: Connection, frame: WorkerFrame) => this.connection.send(conn, frame);
    const checkStopped = () => this.checkStopped();

    this.attestation = new WorkerAttestation(signer, { log: settings.log, send, workerId: () => this.workerId });
    this.runner = new LeaseRunner(settings, {
      mayStart: () => this.state === 'running',
      send,
      sendBinary: (conn, frame) => this.connection.sendBinary(conn, frame),
      signReceipt: (lease, artifacts) => this.attestation.signReceipt(lease, artifacts),
      answeredWhileMoving: (conn) => this.mover.closeWhenAnswered(conn),
      settled: () => {
        this.checkIdle();
        this.checkStopped();
      },
      backendFailed: (message) => this.backend.unavailable(message),
      backendAnswered: () => this.backend.succeeded(),
      emit,
    });
    this.backend = new BackendWatch(settings.backend, {
      log: settings.log,
      send: (frame) => {
        const conn = this.connection.current;
        if (conn?.registered && !conn.closed && conn.protocol >= BACKEND_STATE_PROTOCOL) this.connection.send(conn, frame);
      },
      emit,
    });
    this.mover = new LeaseMover(this.runner, { log: settings.log, resignReceipt: (lease) => this.attestation.resignReceipt(lease), checkStopped });
    this.connection = new GatewayConnection(settings, {
      mayConnect: () => this.mayConnect(),
      isRunning: () => this.state === 'running',
      registerFrame: () => this.registerFrame(),
      onFrame: (conn, frame) => this.onFrame(conn, frame),
      onBinary: (conn, data) => routePipelineFrame(conn, data, (id) => this.runner.leases.get(id), settings.log),
      onSocketClosed: (conn) => this.onSocketClosed(conn),
      onClaimRefused: () => this.mover.loseMoves('the gateway instance cannot take leases back (protocol 1)'),
      onIdentityRefused: () => {
        this.identityRefused = true;
        this.settings.log.info('the gateway instance predates worker identities (protocol 5): registering without one');
      },
      movingLeases: () => this.mover.size,
      nextMoveDelay: () => this.mover.nextDelay(),
      onRefused: (err) => this.onRefused(err),
      checkStopped,
      emit,
    });
    this.finished = new Promise<void>((resolve, reject) => (this.settleFinished = { resolve, reject }));
    this.finished.catch(() => {});
  }

  /** Leases held: running, waiting for a slot, or waiting for the gateway's answer to their report. */
  get activeLeases(): number {
    return this.runner.leases.size;
  }

  /** The models it serves, by kind (the `models` option, or the last `setModels`); undefined: the kinds' default models only. */
  get models(): WorkerModels | undefined {
    return this.settings.models;
  }

  /**
   * Replaces the model list (after loading or unloading a model), checked like the `models`
   * option: throws a TypeError or RangeError naming the first problem, and keeps the old list.
   */
  setModels(models: WorkerModels): void {
    this.settings.models = checkWorkerModels(models, this.kinds, this.slots);
    // A gateway of protocol 3 takes the list now; an older one never routed by model, and a
    // connection still registering (or the next one) sends it in its register.
    const conn = this.connection.current;
    if (conn?.registered && !conn.closed && this.protocol >= MODELS_PROTOCOL) this.connection.send(conn, { type: 'models', models: this.settings.models });
  }

  /** Handler calls running now (never more than `slots`). */
  get running(): number {
    return this.runner.busy;
  }

  get connected(): boolean {
    const conn = this.connection.current;
    return !!conn?.registered && !conn.closed;
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
    if (!this.attestation.enabled) this.connection.open();
    else {
      this.attestation.makeKey().then(
        () => this.connection.open(),
        (err: Error) => {
          this.settings.log.error('could not make the receipt key', { err: err.message });
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
    if (this.mover.size === 0) this.connection.cancelReconnect();
    let resolve!: () => void;
    const promise = new Promise<void>((r) => (resolve = r));
    this.stopping = { promise, resolve, forced: false };
    this.started?.reject(new Error('the worker was stopped before it registered'));
    this.started = undefined;
    this.settings.log.info('stopping: no new leases; waiting for running ones', { running: this.runner.busy, held: this.runner.leases.size });
    const conn = this.connection.current;
    if (conn && !conn.registered && this.mover.size === 0) conn.ws.terminate();
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
      this.settings.log.warn('stop timeout: aborting running leases (they go back to the queue)', { running: this.runner.busy });
      for (const lease of this.runner.leases.values()) this.runner.abortLease(lease, 'stopping');
      this.connection.current?.ws.close(1000, 'worker stopping');
      // Handlers that ignore their signal are not waited for forever.
      s.giveUpTimer = setTimeout(() => this.finishStop(), 5_000);
      this.checkStopped();
    }, Math.max(0, timeoutMs));
  }

  /** Connecting is for a running worker, or a stopping one whose leases are moving to another instance. */
  private mayConnect(): boolean {
    return this.state === 'running' || (this.state === 'stopping' && this.mover.size > 0 && !this.stopping?.forced);
  }

  private registerFrame(): RegisterFrame {
    const { kinds, tier, slots, hardware, software } = this.settings;
    const resume = this.mover.resumeClaims();
    return {
      type: 'register',
      protocol: [...PROTOCOL_VERSIONS],
      kinds,
      tier,
      slots,
      hardware,
      software,
      ...(this.settings.models ? { models: this.settings.models } : {}),
      ...(tier === 'private' ? { receipt_key: this.attestation.receiptKey } : {}),
      ...(resume.length ? { resume } : {}),
      ...(this.identityRefused ? {} : { identity: this.settings.identity }),
    };
  }

  private onFrame(conn: Connection, frame: IncomingFrame): void {
    switch (frame.type) {
      case 'registered':
        return this.onRegistered(conn, frame);
      case 'lease':
        return this.runner.onLease(conn, frame);
      case 'cancel':
        return this.runner.onCancel(frame);
      case 'attest':
        return this.attestation.onAttest(conn, frame);
      case 'models_accepted':
        return this.settings.log.debug('the gateway took the new model list');
      case 'attested':
        return this.settings.log.info('attestation evidence renewed', { expires_at: frame.expires_at });
      case 'reconnect':
        return this.mover.onReconnect(conn);
      case 'drain':
        conn.draining = true;
        this.settings.log.info('the gateway asked to drain: finishing current leases, then reconnecting');
        return this.checkIdle();
      case 'ack': {
        // Protocol 4: one ack for a batch of outputs stands for that many answers, in order.
        const count = Number.isInteger(frame.count) && Number(frame.count) > 1 ? Number(frame.count) : 1;
        for (let i = 0; i < count; i++) this.runner.onAnswer(frame.lease_id, { ok: true, of: String(frame.of) });
        return;
      }
      case 'error':
        return this.onErrorFrame(conn, frame);
      default:
        this.settings.log.debug('ignoring an unknown frame type', { type: frame.type });
    }
  }

  private onRegistered(conn: Connection, frame: IncomingFrame): void {
    if (conn.registered) return;
    const info: RegisteredInfo = {
      worker_id: String(frame.worker_id),
      protocol: Number(frame.protocol),
      heartbeat_ms: typeof frame.heartbeat_ms === 'number' && frame.heartbeat_ms > 0 ? frame.heartbeat_ms : 5_000,
      lease_ttl_ms: typeof frame.lease_ttl_ms === 'number' ? frame.lease_ttl_ms : 30_000,
    };
    this.connection.registered(conn, info.heartbeat_ms);
    this.workerId = info.worker_id;
    this.protocol = info.protocol;
    conn.protocol = info.protocol;
    this.mover.registered(info.lease_ttl_ms);
    const attested = isRecord(frame.attestation) ? { attestation_expires_at: frame.attestation.expires_at } : {};
    this.settings.log.info('registered', { worker_id: info.worker_id, kinds: this.kinds.join(','), tier: this.tier, slots: this.slots, ...attested });
    if (this.mover.size > 0) this.mover.settle(conn, frame);
    this.backend.registered();
    this.emit('registered', info);
    this.started?.resolve();
    this.started = undefined;
    if (this.state === 'stopping') this.checkIdle();
  }

  private onErrorFrame(conn: Connection, frame: IncomingFrame): void {
    const error: GatewayErrorFrame = { code: String(frame.code ?? 'unknown'), message: String(frame.message ?? '') };
    if (typeof frame.lease_id === 'string') error.lease_id = frame.lease_id;
    this.emit('gateway-error', error);
    if (!conn.registered) return this.connection.refused(conn, { code: error.code, message: error.message });
    // Another live process registered under this worker's identity: the gateway closes this connection (4409) for good.
    if (error.code === SUPERSEDED_CODE) return this.connection.refused(conn, { code: error.code, message: error.message });
    if (error.lease_id) return this.runner.onAnswer(error.lease_id, { ok: false, code: error.code, message: error.message });
    this.settings.log.warn('error frame from the gateway', { code: error.code, message: error.message });
  }

  /** A socket closed: a lease moving with it waits for the next one; the others, and rank leases, are lost. */
  private onSocketClosed(conn: Connection): void {
    for (const id of conn.leases) {
      const lease = this.runner.leases.get(id);
      if (!lease) continue;
      if (conn.moving && lease.phase !== 'done' && !lease.rank) this.mover.holdForMove(lease);
      else {
        if (conn.moving && lease.rank) lease.lostInMove = 'a rank lease does not move to another instance: its pipeline runs again';
        this.runner.lostWithConnection(lease);
      }
    }
  }

  private onRefused(err: WorkerRefusedError): void {
    this.state = 'stopping';
    this.stopping = { promise: Promise.resolve(), resolve: () => {}, forced: true };
    this.started?.reject(err);
    this.started = undefined;
    this.emit('refused', err);
    this.finishStop(err);
  }

  /** Closes the socket once its work is done: when stopping (held leases go back) or drained. */
  private checkIdle(): void {
    const conn = this.connection.current;
    if (!conn || conn.closed || !conn.registered) return;
    const held = [...conn.leases].map((id) => this.runner.leases.get(id)).filter((l): l is LeaseState => !!l);
    if (this.state === 'stopping') {
      if (held.some((l) => l.phase === 'running' || l.phase === 'reporting')) return;
      this.settings.log.info('closing the connection', { held_back: held.length });
      conn.ws.close(1000, 'worker stopping');
    } else if (conn.draining && held.length === 0) {
      conn.reconnectNow = true;
      conn.ws.close(1000, 'drained');
    }
  }

  private checkStopped(): void {
    if (this.state !== 'stopping' || !this.stopping) return;
    const conn = this.connection.current;
    if (conn && !conn.closed) return;
    if (this.runner.busy > 0 || this.mover.size > 0) return;
    this.finishStop();
  }

  private finishStop(err?: Error): void {
    if (this.state === 'stopped') return;
    this.state = 'stopped';
    this.backend.stop();
    this.connection.cancelReconnect();
    if (this.stopping) {
      clearTimeout(this.stopping.abortTimer);
      clearTimeout(this.stopping.giveUpTimer);
    }
    const conn = this.connection.current;
    if (conn && !conn.closed) conn.ws.terminate();
    this.mover.loseMoves('the worker stopped');
    for (const lease of [...this.runner.leases.values()]) {
      this.runner.abortLease(lease, 'stopping');
      if (lease.phase === 'pending') this.runner.drop(lease, 'the worker stopped');
    }
    if (this.runner.busy > 0) this.settings.log.warn('stopped with handlers still running (they ignore their abort signal)', { running: this.runner.busy });
    else this.settings.log.info('stopped');
    this.stopping?.resolve();
    this.emit('stopped');
    if (err) this.settleFinished.reject(err);
    else this.settleFinished.resolve();
  }
}
