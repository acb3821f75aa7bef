import { ulid } from 'ulid';
import type { Logger } from 'pino';
import { isDatastoreUnavailable, toApiError } from '../models/errors.js';
import { KIND_NAMES } from '../models/kinds.js';
import type { OperatorStore, RankConflict } from '../models/stores.js';
import type { OperatorTrust } from '../models/types.js';
import type { Evidence } from '../sdk/attestation/index.js';
import { HANDOVER_PROTOCOL, PROTOCOL_VERSIONS, type ErrorFrame, type GatewayFrame, type LeaseReport, type RegisterFrame, type RegisteredFrame, type WorkerModels } from '../sdk/protocol/index.js';
import { TIER_RANK, workerIdentityKey, type ConnectedWorker, type WorkerLink } from './connected-worker.js';

export type { WorkerLink } from './connected-worker.js';
import type { Dispatcher } from './dispatcher.js';
import { privateWorkerTiers, type PrivateRegistrations } from './private-registration.js';
import type { TrustEnforcer } from './trust-enforcer.js';
import { modelFieldTooNew, registerFieldTooNew } from './worker-frames.js';
import { checkWorkerModels, WorkerModelsError } from './worker-models.js';

/** Who a worker token belongs to, and the trust it carries (read at connect). */
export interface TokenOwner {
  owner: { type: 'operator' | 'account'; id: string };
  trust: OperatorTrust;
}

/** A registration the gateway refuses: the `error` frame that says why, and the close that follows. */
export interface WorkerRefusal {
  error: ErrorFrame;
  close: number;
  reason: string;
}

/**
 * Where a `register` (or the evidence that completes a private one) got to: admitted (tell it
 * `registered`, then `start` it), waiting for a private worker's evidence, or refused.
 */
export type Admission = { worker: ConnectedWorker; registered: RegisteredFrame } | { attesting: true } | { refusal: WorkerRefusal };

export interface WorkerSessionDeps {
  dispatcher: Dispatcher;
  operators: OperatorStore;
  /** Registers private workers once their evidence checks out; with no verifier configured they are refused. */
  attestation: PrivateRegistrations;
  /** Applies operator trust changes to the workers registered on every instance. */
  trust: TrustEnforcer;
  gatewayId: string;
  log: Logger;
}

const refused = (code: string, message: string, close: number, reason: string, details?: Record<string, unknown>): { refusal: WorkerRefusal } => ({
  refusal: { error: { type: 'error', code, message, ...(details ? { details } : {}) }, close, reason },
});
const badRegister = (message: string, details?: Record<string, unknown>) => refused('bad_frame', message, 4400, 'bad register frame', details);

/** The protocol error of a model list whose rank count is not the catalogue's (docs/ranks.md). */
export const RANK_MISMATCH = 'rank_mismatch';

/** What a `rank_mismatch` says: the model, the catalogue's count and the worker's, and where it is in the list. */
function rankMismatch(c: RankConflict, models: WorkerModels): { message: string; details: Record<string, unknown> } {
  const i = (models[c.kind] ?? []).findIndex((m) => m.id === c.id);
  const rank = models[c.kind]?.[i]?.rank;
  const catalogue = c.catalogue === null ? 'whole' : `in ${c.catalogue} ranks`;
  const advertised = rank ? `rank ${rank.index} of ${rank.count}` : 'it whole';
  return {
    message:
      `${c.kind} model ${c.id} is served ${catalogue} in the catalogue, and this worker advertises ${advertised}: ` +
      `serve it as the catalogue says, or have an operator change the model (PUT /v1/admin/models/${c.kind}/${encodeURIComponent(c.id)}, docs/ranks.md)`,
    details: { path: `/models/${c.kind}/${i}${rank ? '/rank/count' : ''}`, kind: c.kind, model: c.id, catalogue_ranks: c.catalogue, advertised_ranks: c.advertised },
  };
}

/**
 * The gateway's half of one worker connection (docs/worker-protocol.md): the registration rules
 * (protocol version, the fields each version brings, tier against the token's trust, the private
 * tier's evidence, models, identity), then what each frame of a registered worker means. It
 * returns what to answer; the socket server only parses frames, sends what it is given and
 * closes when told, as a transport should.
 */
export class WorkerSession {
  /** The worker once registered. */
  worker: ConnectedWorker | null = null;

  constructor(
    private readonly deps: WorkerSessionDeps,
    private owner: TokenOwner,
    private readonly link: WorkerLink,
  ) {}

  /** A private registration waits for its evidence (the socket's silence check is off meanwhile). */
  get attesting(): boolean {
    return this.deps.attestation.waiting(this) !== undefined;
  }

  /** Checks a `register`; admitted, the worker's older connections are retired and its resumed leases adopted. */
  async admit(frame: RegisterFrame, attested?: ConnectedWorker): Promise<Admission> {
    const { dispatcher, attestation, operators, gatewayId } = this.deps;
    const version = Math.max(...frame.protocol.filter((v) => (PROTOCOL_VERSIONS as readonly number[]).includes(v)));
    if (!Number.isFinite(version)) return refused('bad_frame', `no common protocol version; the gateway speaks ${PROTOCOL_VERSIONS.join(', ')}`, 4400, 'protocol');
    if (frame.tier === 'private' && !attestation.enabled) {
      return refused('forbidden', 'private workers must present attestation evidence, and this gateway has no attestation verifier configured (ATTESTATION_JWKS)', 4403, 'attestation required');
    }
    const tooNew = registerFieldTooNew(frame, version);
    if (tooNew) return badRegister(tooNew);
    const kinds = frame.kinds.includes('all') ? [...KIND_NAMES] : frame.kinds;
    let models: WorkerModels = {};
    try {
      models = checkWorkerModels(frame.models ?? {}, kinds);
    } catch (err) {
      if (!(err instanceof WorkerModelsError)) throw err;
      return refused(err.code, err.message, 4400, 'bad register frame', { path: err.path });
    }
    if (frame.tier === 'private' && !frame.receipt_key) return badRegister('a private worker registers with receipt_key: the EC P-384 public JWK its receipts verify with');
    // Read again: a socket may have waited since connect, across a demotion its instance has already handled.
    if (this.owner.owner.type === 'operator') this.owner = { ...this.owner, trust: (await operators.get(this.owner.owner.id))?.trust ?? 'open' };
    const { owner } = this;
    // Private rests on attestation, not on the token's trust (which sets the lower tiers it serves).
    if (frame.tier !== 'private' && TIER_RANK[frame.tier] > TIER_RANK[owner.trust]) {
      return refused('forbidden', `this token's trust is ${owner.trust}; it cannot register a ${frame.tier} worker`, 4403, 'tier not allowed');
    }
    const worker: ConnectedWorker = attested ?? {
      info: {
        worker_id: `wkr_${ulid()}`,
        kinds,
        tier: frame.tier,
        slots: frame.slots,
        busy: 0,
        gateway_id: gatewayId,
        owner: owner.owner,
        hardware: frame.hardware ?? {},
        software: frame.software ?? {},
        models,
        connected_at: new Date().toISOString(),
      },
      queues: [],
      send: (f) => this.link.send(f),
      close: (code, reason) => this.link.close(code, reason),
      link: this.link,
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
        await attestation.begin(this, worker, frame, this.link);
        return { attesting: true };
      }
    }
    // In the catalogue before it counts; a rank count the catalogue disagrees with refuses it, recording nothing.
    let conflict: RankConflict | null;
    try {
      conflict = await dispatcher.advertise(models);
    } catch (err) {
      // Like a failed attach: a close the worker retries, never the final 4400.
      const unavailable = toApiError(err).code === 'unavailable';
      this.deps.log.warn({ err }, "could not record a registering worker's models; closing it");
      return refused(unavailable ? 'unavailable' : 'internal', 'registration failed; reconnect', 1011, 'registration failed; reconnect');
    }
    if (conflict) {
      const { message, details } = rankMismatch(conflict, models);
      return refused(RANK_MISMATCH, message, 4400, 'rank count differs from the catalogue', details);
    }
    // Protocol 5: its older connection, here or on any instance, is retired before this one counts.
    await dispatcher.claimIdentity(worker);
    // Protocol 2: leases brought from a stopping instance are adopted before any new one is offered.
    const moved = version >= HANDOVER_PROTOCOL ? await dispatcher.adopt(worker, frame.resume ?? []) : null;
    return {
      worker,
      registered: {
        type: 'registered',
        worker_id: worker.info.worker_id,
        protocol: version,
        heartbeat_ms: dispatcher.heartbeatMs,
        lease_ttl_ms: dispatcher.leaseTtlMs,
        ...(worker.attestation?.current ? { attestation: { expires_at: worker.attestation.current.expires_at } } : {}),
        ...(moved ?? {}),
      },
    };
  }

  /**
   * Attaches an admitted worker, once it has been told `registered` (its first lease comes after
   * that): counted in the fleet and offered work. A failure leaves no ghost attached: the worker
   * is refused with a retryable close and reconnects.
   */
  async start(worker: ConnectedWorker): Promise<WorkerRefusal | null> {
    try {
      await this.deps.dispatcher.attach(worker);
      this.worker = worker;
      // A demotion announced between the read in `admit` and the attach found no worker to close here: check once more.
      if (this.owner.owner.type === 'operator' && worker.info.tier !== 'open') await this.deps.trust.enforce(this.owner.owner.id);
      return null;
    } catch (err) {
      this.deps.log.warn({ err, workerId: worker.info.worker_id }, 'attaching a worker failed; closing it');
      await this.deps.dispatcher.detach(worker, 1011, 'registration failed; reconnect');
      this.worker = null;
      return refused('internal', 'registration failed; reconnect', 1011, 'registration failed; reconnect').refusal;
    }
  }

  /**
   * Evidence from a private worker: completes its registration (an admission), or refreshes a
   * registered worker's evidence (null; refused, it keeps serving its other tiers).
   */
  async attestation(evidence: Evidence, nonce?: string): Promise<Admission | null> {
    const gate = this.deps.attestation;
    const waiting = gate.waiting(this);
    const attesting = waiting?.worker ?? (this.worker?.attestation ? this.worker : null);
    if (!attesting) {
      const message = 'attestation frames answer the attest nonces of private workers';
      if (this.worker) {
        this.link.send({ type: 'error', code: 'bad_frame', message });
        return null;
      }
      return refused('bad_frame', message, 4400, 'not registered');
    }
    const failed = await gate.answer(attesting, evidence, nonce);
    if (!waiting) {
      this.link.send(failed ?? { type: 'attested', expires_at: attesting.attestation!.current!.expires_at });
      return null;
    }
    if (failed) return { refusal: { error: failed, close: 4403, reason: 'attestation failed' } };
    // Registration resumes with the attested worker, reading the token's trust again on the way.
    const admission = await this.admit(waiting.frame, waiting.worker);
    if ('worker' in admission) gate.settled(this);
    return admission;
  }

  /**
   * Protocol 3: the worker's new model list. Refused (`bad_models`, naming what is wrong;
   * `rank_mismatch`; `bad_frame` for a rank before protocol 6) it keeps its current list;
   * accepted it is in force before `models_accepted`.
   */
  async models(models: WorkerModels): Promise<GatewayFrame> {
    const worker = this.worker!;
    const tooNew = modelFieldTooNew(models, worker.protocol ?? 1);
    if (tooNew) return { type: 'error', code: 'bad_frame', of: 'models', message: tooNew };
    let checked: WorkerModels;
    try {
      checked = checkWorkerModels(models, worker.info.kinds);
    } catch (err) {
      if (!(err instanceof WorkerModelsError)) throw err;
      return { type: 'error', code: err.code, of: 'models', message: err.message, details: { path: err.path } };
    }
    try {
      const conflict = await this.deps.dispatcher.setModels(worker, checked);
      if (conflict) return { type: 'error', code: RANK_MISMATCH, of: 'models', ...rankMismatch(conflict, checked) };
    } catch (err) {
      const unavailable = toApiError(err).code === 'unavailable';
      this.deps.log.warn({ err, workerId: worker.info.worker_id }, "could not record a worker's models");
      return {
        type: 'error',
        code: unavailable ? 'unavailable' : 'internal',
        of: 'models',
        retryable: unavailable,
        message: unavailable ? 'the gateway cannot reach its datastore: send the models frame again' : 'the gateway could not take the model list',
      };
    }
    return { type: 'models_accepted' };
  }

  /** Protocol 5: the worker's backend went down or answers again. */
  backend(available: boolean, message?: string): void {
    this.deps.dispatcher.setBackend(this.worker!, available, message);
  }

  /** Extends the worker's leases. Heartbeats get no answer; one lost to a datastore outage is made up by the next. */
  async heartbeat(): Promise<void> {
    const worker = this.worker!;
    await this.deps.dispatcher.heartbeat(worker).catch((err: unknown) => {
      if (!isDatastoreUnavailable(err)) throw err;
      this.deps.log.debug({ err, workerId: worker.info.worker_id }, 'heartbeat not recorded: the datastore is unavailable');
    });
  }

  /**
   * A lease frame's answer: `ack`, or an `error` naming its lease and frame type so the worker
   * can match it (`unavailable`, a datastore outage, asks for the frame again). Never rejects.
   */
  async report(frame: LeaseReport): Promise<GatewayFrame> {
    let refusal;
    try {
      refusal = await this.deps.dispatcher.report(this.worker!, frame);
    } catch (err) {
      const unavailable = toApiError(err).code === 'unavailable';
      this.deps.log.warn({ err, leaseId: frame.lease_id, of: frame.type }, unavailable ? 'worker report deferred: the datastore is unavailable' : 'worker report failed');
      return unavailable
        ? { type: 'error', code: 'unavailable', lease_id: frame.lease_id, of: frame.type, retryable: true, message: 'the gateway cannot reach its datastore: send this frame again' }
        : { type: 'error', code: 'internal', lease_id: frame.lease_id, of: frame.type, retryable: false, message: 'the gateway could not handle this frame' };
    }
    return refusal ? { type: 'error', lease_id: frame.lease_id, of: frame.type, ...refusal } : { type: 'ack', lease_id: frame.lease_id, of: frame.type };
  }

  /** The connection closed (`silent`: for missed heartbeats): a registration waiting for evidence stops, a worker leaves. */
  async end(silent: boolean): Promise<void> {
    this.deps.attestation.abandon(this);
    if (this.worker) await this.deps.dispatcher.detach(this.worker, 1000, 'bye', silent ? 'heartbeat' : 'disconnect');
  }
}
