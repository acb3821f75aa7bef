import type { GatewayFrame } from '../../sdk/protocol/index.js';

/** Output frames one socket may have waiting for the log before it stops reading more. */
const MAX_PENDING = 4096;

/**
 * The output frames of one worker socket whose answers wait for the run's log. The socket's
 * frame loop does not wait for them (a burst of deltas goes to the log as one batch, and a
 * new lease's first token does not queue behind another's round trip), but a lease's answers
 * still go out in the order its frames came, and its other frames are handled only after its
 * outputs are logged (a `complete` cannot overtake them).
 *
 * With `batchAcks` (protocol 4) the acks of a lease's outputs logged together leave as one
 * `ack` with a `count`, sent once the current turn of the event loop is over: one frame back
 * to the worker per batch instead of one per delta.
 */
export class PendingOutputs {
  private readonly byLease = new Map<string, Promise<void>>();
  /** Protocol 4: acks held for the flush, per lease (insertion order is answer order). */
  private readonly held = new Map<string, number>();
  private flushing = false;
  private count = 0;

  constructor(
    private readonly send: (frame: GatewayFrame) => void,
    private readonly batchAcks: () => boolean,
  ) {}

  /** `answer` is the frame to send once the delta is logged; it must not reject. */
  add(leaseId: string, answer: Promise<GatewayFrame>): void {
    const before = this.byLease.get(leaseId);
    this.count++;
    const sent: Promise<void> = (before ? before.then(() => answer) : answer).then((frame) => {
      this.answer(leaseId, frame);
      this.count--;
      if (this.byLease.get(leaseId) === sent) this.byLease.delete(leaseId);
    });
    this.byLease.set(leaseId, sent);
  }

  /**
   * Resolves once the lease's outputs received so far are answered. Its held acks are sent
   * before anything that follows, so call `flush(leaseId)` before answering its next frame.
   */
  settled(leaseId: string): Promise<void> | undefined {
    return this.byLease.get(leaseId);
  }

  /** Sends the lease's held acks now (before another answer of the lease). */
  flush(leaseId: string): void {
    const n = this.held.get(leaseId);
    if (n === undefined) return;
    this.held.delete(leaseId);
    this.send(n > 1 ? { type: 'ack', lease_id: leaseId, of: 'output', count: n } : { type: 'ack', lease_id: leaseId, of: 'output' });
  }

  /** Resolves once every output received so far is answered. */
  all(): Promise<unknown> {
    return Promise.all(this.byLease.values());
  }

  /** Backpressure: a worker sending faster than the log takes it is read no further meanwhile. */
  get full(): boolean {
    return this.count >= MAX_PENDING;
  }

  private answer(leaseId: string, frame: GatewayFrame): void {
    if (frame.type !== 'ack' || !this.batchAcks()) {
      this.flush(leaseId);
      this.send(frame);
      return;
    }
    this.held.set(leaseId, (this.held.get(leaseId) ?? 0) + 1);
    if (this.flushing) return;
    this.flushing = true;
    setImmediate(() => {
      this.flushing = false;
      for (const id of [...this.held.keys()]) this.flush(id);
    });
  }
}
