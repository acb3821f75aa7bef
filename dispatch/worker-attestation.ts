import type { JWK } from 'jose';
import type { Logger } from 'pino';
import type { AttestationService, WorkerAttestation } from './attestation/attestation-service.js';
import { AttestationError, type Evidence } from '../sdk/attestation/index.js';
import type { GatewayFrame } from '../sdk/protocol/index.js';

export interface AttestationSessionOptions {
  service: AttestationService;
  workerId: string;
  /** The receipt key the worker registered with; every piece of evidence must bind it. */
  receiptKey: JWK;
  send(frame: GatewayFrame): void;
  log: Logger;
  /** Fresh evidence is asked for this long before the current evidence expires (ATTESTATION_REFRESH_BEFORE_MS). */
  refreshBeforeMs: number;
  /** How long a nonce waits for its answer (ATTESTATION_NONCE_TTL_MS). */
  nonceTtlMs: number;
  /** New evidence checked out: the worker may take private work again. */
  onAttested(record: WorkerAttestation): void;
  /** The registration nonce went unanswered. */
  onTimeout(): void;
}

/**
 * The gateway's half of one private worker connection's attestation (docs/worker-protocol.md,
 * "Private workers"). It sends `attest` nonces, checks the answers through the
 * AttestationService, and keeps the connection's current evidence. Eligibility for private
 * work is `validAt(now)`, read at every lease: evidence that lapses stops private leases by
 * itself, with no timer or flag to miss. One nonce is outstanding at a time; a late answer to an
 * older one is refused (the service consumes nonces, so none can be answered twice).
 */
export class AttestationSession {
  current: WorkerAttestation | null = null;
  /** The evidence a refresh replaced: a receipt signed just before the refresh is checked against it. */
  previous: WorkerAttestation | null = null;
  private nonce: string | null = null;
  private timer?: NodeJS.Timeout;
  private closed = false;

  constructor(private readonly opts: AttestationSessionOptions) {}

  /** The connection's evidence, newest first: the current one and the one it replaced. */
  evidence(): WorkerAttestation[] {
    return [this.current, this.previous].filter((e): e is WorkerAttestation => e !== null);
  }

  /** Whether the connection's evidence is still good at `at` (ms since the epoch). */
  validAt(at: number): boolean {
    return this.current !== null && Date.parse(this.current.expires_at) > at;
  }

  /** Sends a fresh nonce. A refresh left unanswered for the nonce's life is asked again. */
  async ask(): Promise<void> {
    if (this.closed) return;
    try {
      this.nonce = await this.opts.service.issueNonce(this.opts.workerId);
    } catch (err) {
      this.opts.log.warn({ err, workerId: this.opts.workerId }, 'could not issue an attestation nonce; retrying');
      return this.arm(this.retryMs, () => void this.ask());
    }
    this.opts.send({ type: 'attest', nonce: this.nonce });
    this.arm(this.opts.nonceTtlMs, () => this.unanswered());
  }

  /**
   * Checks the worker's evidence against the outstanding nonce (consumed either way).
   *
   * @throws AttestationError
   */
  async answer(evidence: Evidence, answers?: string): Promise<WorkerAttestation> {
    const nonce = this.nonce;
    if (!nonce) throw new AttestationError('wrong_nonce', 'no attest nonce is outstanding: evidence is taken only in answer to an attest frame, once');
    // A late answer to a nonce this session has replaced: refused without spending the current one.
    if (answers !== undefined && answers !== nonce) throw new AttestationError('wrong_nonce', 'this evidence answers an older nonce; answer the latest attest frame');
    this.nonce = null;
    clearTimeout(this.timer);
    let record: WorkerAttestation;
    try {
      record = await this.opts.service.verify(this.opts.workerId, nonce, this.opts.receiptKey, evidence);
    } catch (err) {
      // A registered worker keeps its current evidence until it expires, and gets another chance.
      if (this.current) this.arm(this.retryMs, () => void this.ask());
      throw err;
    }
    if (this.closed) return record;
    this.previous = this.current;
    this.current = record;
    this.scheduleRefresh(record);
    this.opts.onAttested(record);
    return record;
  }

  /** The connection ended: no more nonces, and audits no longer see its evidence as current. */
  close(): void {
    this.closed = true;
    clearTimeout(this.timer);
    void this.opts.service.forget(this.opts.workerId).catch(() => {});
  }

  /** After a failed or unanswered refresh: soon, but not in a tight loop. */
  private get retryMs(): number {
    return Math.max(1_000, Math.min(this.opts.refreshBeforeMs, 30_000));
  }

  /**
   * Asks again ATTESTATION_REFRESH_BEFORE_MS before expiry, but never before half the
   * evidence's life has passed, so short-lived evidence cannot make it ask in a loop.
   */
  private scheduleRefresh(record: WorkerAttestation): void {
    const verified = Date.parse(record.verified_at);
    const expires = Date.parse(record.expires_at);
    const at = Math.max(expires - this.opts.refreshBeforeMs, verified + (expires - verified) / 2);
    this.arm(at - Date.now(), () => void this.ask());
  }

  private unanswered(): void {
    this.nonce = null;
    if (!this.current) return this.opts.onTimeout();
    this.opts.log.warn({ workerId: this.opts.workerId, expiresAt: this.current.expires_at }, 'a private worker did not answer an evidence refresh');
    void this.ask();
  }

  private arm(ms: number, fn: () => void): void {
    clearTimeout(this.timer);
    if (this.closed) return;
    this.timer = setTimeout(fn, Math.max(0, ms));
    this.timer.unref();
  }
}
