import type { JWK } from 'jose';
import type { Logger } from 'pino';
import type { AttestationService } from './attestation/attestation-service.js';
import { AttestationError, type Evidence } from '../sdk/attestation/index.js';
import { TIERS, type Tier } from '../models/kinds.js';
import type { OperatorTrust } from '../models/types.js';
import { TIER_RANK, type ConnectedWorker, type WorkerLink } from './connected-worker.js';
import type { Dispatcher } from './dispatcher.js';
import { AttestationSession } from './worker-attestation.js';
import type { ErrorFrame, RegisterFrame } from '../sdk/protocol/index.js';


export interface PrivateRegistrationsOptions {
  service: AttestationService;
  dispatcher: Dispatcher;
  log: Logger;
  refreshBeforeMs: number;
  nonceTtlMs: number;
}

/** Close code of a registration whose first nonce went unanswered: worth retrying later, unlike 4403. */
export const ATTESTATION_TIMEOUT_CLOSE = 4408;

/**
 * The tiers a private worker takes work from: private (while attested), then the tiers its
 * token's trust allows. Attestation vouches for the GPU, not for the operator, so it never
 * opens trusted work to an operator that was not vetted.
 */
export function privateWorkerTiers(trust: OperatorTrust): Tier[] {
  return ['private', ...TIERS.filter((t) => t !== 'private' && TIER_RANK[t] <= TIER_RANK[trust]).sort((a, b) => TIER_RANK[b] - TIER_RANK[a])];
}

/**
 * Registration of private workers (docs/worker-protocol.md, "Private workers"): a `register`
 * with `tier: "private"` is answered with an `attest` nonce, and the worker is registered only
 * once its `attestation` answer checks out. Later `attestation` frames answer the refresh
 * nonces of registered workers. Keeps the registrations waiting for their evidence, by socket.
 */
export class PrivateRegistrations {
  /** By the connection's session (any object that stands for the connection). */
  private readonly pending = new WeakMap<object, { worker: ConnectedWorker; frame: RegisterFrame }>();

  constructor(private readonly opts: PrivateRegistrationsOptions) {}

  get enabled(): boolean {
    return this.opts.service.enabled;
  }

  /** Sends the first nonce; the registration completes when `answer` accepts evidence for it. */
  async begin(connection: object, worker: ConnectedWorker, frame: RegisterFrame, link: WorkerLink): Promise<void> {
    const session = new AttestationSession({
      service: this.opts.service,
      workerId: worker.info.worker_id,
      receiptKey: frame.receipt_key as JWK,
      send: (f) => link.send(f),
      log: this.opts.log,
      refreshBeforeMs: this.opts.refreshBeforeMs,
      nonceTtlMs: this.opts.nonceTtlMs,
      onAttested: () => this.opts.dispatcher.offer(worker),
      onTimeout: () => {
        link.send({ type: 'error', code: 'attestation_timeout', message: `no attestation evidence arrived within ${this.opts.nonceTtlMs} ms of the attest nonce; connect again` });
        link.close(ATTESTATION_TIMEOUT_CLOSE, 'attestation timed out');
      },
    });
    worker.attestation = session;
    this.pending.set(connection, { worker, frame });
    await session.ask();
  }

  /** The registration this connection is attesting, if any. */
  waiting(connection: object): { worker: ConnectedWorker; frame: RegisterFrame } | undefined {
    return this.pending.get(connection);
  }

  /** The registration completed: the worker's session now ends with the worker (Dispatcher.detach). */
  settled(connection: object): void {
    this.pending.delete(connection);
  }

  /** The connection closed while attesting (or its registration was refused): stop asking. */
  abandon(connection: object): void {
    this.pending.get(connection)?.worker.attestation?.close();
    this.pending.delete(connection);
  }

  /**
   * Checks an `attestation` frame: null if the evidence was accepted, else the `error` frame that
   * says why (code `attestation_failed`, the check's own code in `reason`).
   */
  async answer(worker: ConnectedWorker, evidence: Evidence, nonce?: string): Promise<ErrorFrame | null> {
    try {
      const record = await worker.attestation!.answer(evidence, nonce);
      this.opts.log.info({ workerId: worker.info.worker_id, expiresAt: record.expires_at, gpus: record.gpus.length }, 'worker attested');
      return null;
    } catch (err) {
      if (!(err instanceof AttestationError)) throw err;
      this.opts.log.warn({ workerId: worker.info.worker_id, reason: err.code, why: err.message }, 'attestation refused');
      return { type: 'error', code: 'attestation_failed', reason: err.code, message: `${err.code}: ${err.message}` };
    }
  }
}
