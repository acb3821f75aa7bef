import type { GatewayFrame } from '../../sdk/protocol/index.js';

/** Output frames one socket may have waiting for the log before it stops reading more. */
const MAX_PENDING = 4096;

/**
 * The output frames of one worker socket whose answers wait for the run's log. The socket's
 * frame loop does not wait for them (a burst of deltas goes to the log as one batch, and a
 * new lease's first token does not queue behind another's round trip), but a lease's answers
 * still go out in the order its frames came, and its other frames are handled only after its
 * outputs are logged (a `complete` cannot overtake them).
 */
export class PendingOutputs {
  private readonly byLease = new Map<string, Promise<void>>();
  private count = 0;

  constructor(private readonly send: (frame: GatewayFrame) => void) {}

  /** `answer` is the frame to send once the delta is logged; it must not reject. */
  add(leaseId: string, answer: Promise<GatewayFrame>): void {
    const before = this.byLease.get(leaseId);
    this.count++;
    const sent: Promise<void> = (before ? before.then(() => answer) : answer).then((frame) => {
      this.send(frame);
      this.count--;
      if (this.byLease.get(leaseId) === sent) this.byLease.delete(leaseId);
    });
    this.byLease.set(leaseId, sent);
  }

  /** Resolves once the lease's outputs received so far are answered. */
  settled(leaseId: string): Promise<void> | undefined {
    return this.byLease.get(leaseId);
  }

  /** Resolves once every output received so far is answered. */
  all(): Promise<unknown> {
    return Promise.all(this.byLease.values());
  }

  /** Backpressure: a worker sending faster than the log takes it is read no further meanwhile. */
  get full(): boolean {
    return this.count >= MAX_PENDING;
  }
}
