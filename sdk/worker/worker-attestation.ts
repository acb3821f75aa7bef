import type { WorkerFrame } from '../protocol/index.js';
import type { ReceiptSigner, ReceiptSubject } from './attestation.js';
import type { Connection, IncomingFrame } from './gateway-connection.js';
import type { LeaseState } from './lease-state.js';
import type { WorkerLogger } from './logger.js';

export interface WorkerAttestationContext {
  log: WorkerLogger;
  send(conn: Connection, frame: WorkerFrame): boolean;
  /** The current registration's worker id, which receipts name. */
  workerId(): string | null;
}

/**
 * The private tier's side of the protocol (docs/confidentiality.md): the receipt key in
 * `register`, evidence answering `attest` nonces, and receipts on private leases' reports.
 * The keys and the signing themselves are the ReceiptSigner's (attestation.ts), which knows
 * nothing of frames. Without a signer (open and trusted workers) it answers no nonce and
 * signs nothing.
 */
export class WorkerAttestation {
  private receiptJwk?: Record<string, unknown>;

  constructor(
    private readonly signer: ReceiptSigner | undefined,
    private readonly ctx: WorkerAttestationContext,
  ) {}

  get enabled(): boolean {
    return !!this.signer;
  }

  /** The public receipt key for `register`: made before the first connection, since it is registered with the worker. */
  async makeKey(): Promise<void> {
    this.receiptJwk = (await this.signer!.publicJwk()) as Record<string, unknown>;
  }

  get receiptKey(): Record<string, unknown> | undefined {
    return this.receiptJwk;
  }

  /** The gateway asks for evidence (at registration, and before the current evidence expires). */
  onAttest(conn: Connection, frame: IncomingFrame): void {
    const { log } = this.ctx;
    if (!this.signer || typeof frame.nonce !== 'string') return log.warn('ignoring an attest frame: this worker has no attestation set up, or the frame has no nonce');
    const nonce = frame.nonce;
    this.signer.evidenceFor(nonce).then(
      (evidence) => {
        this.ctx.send(conn, { type: 'attestation', nonce, evidence });
      },
      (err: Error) => {
        log.error('could not obtain attestation evidence', { err: err.message, registered: conn.registered });
        // Not registered yet: try again on a new connection (with backoff). Registered: the
        // gateway asks again later; meanwhile the worker gets no private lease once its evidence lapses.
        if (!conn.registered && !conn.closed) conn.ws.close(1000, 'no attestation evidence');
      },
    );
  }

  /**
   * A private lease's receipt, over its input and input files as leased and its artifacts as
   * uploaded. A rank lease's (only the last rank completes with one) signs the input's hashes as
   * the lease gave them, since its rank never saw the input, and names the worker of each rank.
   */
  async signReceipt(lease: LeaseState, artifacts: ReceiptSubject['artifacts']): Promise<string> {
    const { info } = lease;
    const files = Object.entries(info.files ?? {});
    // The lease's own hashes: a file the handler fetched was checked against them on arrival.
    const inputFiles = info.rank ? info.input_files : files.length > 0 ? Object.fromEntries(files.map(([field, f]) => [field, f.sha256])) : undefined;
    const common = {
      run_id: info.run_id,
      worker_id: this.ctx.workerId() ?? '',
      kind: info.kind,
      ...(inputFiles && Object.keys(inputFiles).length > 0 && { input_files: inputFiles }),
      artifacts,
    };
    try {
      if (info.rank && info.input_sha256 === undefined) throw new Error('the rank lease carries no input_sha256 to sign: the last rank never sees the input, so it signs the hash the gateway gives every rank of a private pipeline');
      lease.receiptSubject = info.rank ? { ...common, input_sha256: info.input_sha256!, ranks: info.rank.workers } : { ...common, input: info.input };
      return await this.signer!.sign(lease.receiptSubject);
    } catch (err) {
      throw Object.assign(new Error(`could not sign the receipt: ${(err as Error).message}`), { code: 'receipt_failed', retryable: true });
    }
  }

  /** A lease resumed on another instance is held by a new worker id: its receipt must name that one. */
  async resignReceipt(lease: LeaseState): Promise<void> {
    const subject = lease.receiptSubject;
    const final = lease.finalFrame;
    const workerId = this.ctx.workerId();
    if (!subject || final?.type !== 'complete' || !final.receipt || !workerId || subject.worker_id === workerId) return;
    subject.worker_id = workerId;
    try {
      final.receipt = await this.signer!.sign(subject);
    } catch (err) {
      this.ctx.log.error('could not sign the receipt again after a move; the gateway will refuse it', { lease_id: lease.info.lease_id, err: (err as Error).message });
    }
  }
}
