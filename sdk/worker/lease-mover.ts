import WebSocket from 'ws';
import { DELTA_SEQ_PROTOCOL, type ResumeClaim } from '../protocol/index.js';
import type { Connection, IncomingFrame } from './gateway-connection.js';
import type { LeaseRunner } from './lease-runner.js';
import type { LeaseState } from './lease-state.js';
import type { WorkerLogger } from './logger.js';

/** On `reconnect`, how long the old socket stays open for answers to frames already sent. */
const MOVE_ANSWER_WAIT_MS = 5_000;

export interface LeaseMoverContext {
  log: WorkerLogger;
  /** A moved lease's receipt, signed under the old worker id, is signed again under the new one. */
  resignReceipt(lease: LeaseState): Promise<void>;
  /** Moves that ended may have been all a stopping worker was waiting for. */
  checkStopped(): void;
}

/**
 * Carries leases from a stopping gateway instance to another one (protocol 2, docs/worker-protocol.md,
 * "Moving to another instance"). On `reconnect` the old socket closes once its frames are
 * answered, the leases wait (their handlers still running, their frames held) to be claimed in
 * the next `register`, and the new instance's `registered` says which it took back.
 */
export class LeaseMover {
  /** Leases on their way to another gateway instance, claimed at the next registration. */
  private readonly moving = new Set<LeaseState>();
  private tries = 0;
  private deadline?: NodeJS.Timeout;
  /** Past the lease TTL the old instance's lock has lapsed: nobody could take the lease back. */
  private leaseTtlMs = 30_000;

  constructor(
    private readonly runner: Pick<LeaseRunner, 'leases' | 'sendLease' | 'sendFinal' | 'drop' | 'abortLease' | 'flushOutput'>,
    private readonly ctx: LeaseMoverContext,
  ) {}

  /** Leases waiting to be claimed. */
  get size(): number {
    return this.moving.size;
  }

  /** The `resume` claims of the next register: proven with the upload token only their lease frame carried. */
  resumeClaims(): ResumeClaim[] {
    return [...this.moving].map((l) => ({ lease_id: l.info.lease_id, fence: l.info.fence, upload_token: l.info.upload_token }));
  }

  /** While leases are moving, retries are quick: they must be claimed before their TTL runs out. */
  nextDelay(): number {
    const cap = this.tries === 0 ? 0 : Math.min(1_000, 100 * 2 ** (this.tries - 1));
    this.tries++;
    return cap / 2 + Math.random() * (cap / 2);
  }

  /** A registration succeeded: its lease TTL bounds later moves, and the quick retries start over. */
  registered(leaseTtlMs: number): void {
    this.leaseTtlMs = leaseTtlMs;
    this.tries = 0;
  }

  /**
   * The gateway instance is stopping and hands this worker's leases over: once every frame
   * already sent on this socket is answered, close it and register again at the same URL
   * (the load balancer picks another instance), claiming the leases still held. Handlers keep
   * running meanwhile; their frames are held until the lease is resumed.
   */
  onReconnect(conn: Connection): void {
    if (conn.moving || conn.closed) return;
    conn.moving = true;
    for (const id of conn.leases) {
      const lease = this.runner.leases.get(id);
      // A rank lease stays: its frames go on until the socket closes, and then it is lost (docs/worker-protocol.md, "Ranks").
      if (lease && lease.phase !== 'done' && !lease.rank) lease.moving = true;
    }
    this.ctx.log.info('the gateway asked to reconnect: moving the leases to another instance', { leases: conn.leases.size });
    // Answers that never come (an `internal` error carries no lease id) do not hold the move up.
    conn.timers.push(setTimeout(() => this.closeForMove(conn), MOVE_ANSWER_WAIT_MS));
    this.closeWhenAnswered(conn);
  }

  closeWhenAnswered(conn: Connection): void {
    if (!conn.moving || conn.closed) return;
    for (const id of conn.leases) {
      const lease = this.runner.leases.get(id);
      if (lease && lease.answered < lease.sent) return;
    }
    this.closeForMove(conn);
  }

  private closeForMove(conn: Connection): void {
    if (conn.closed || conn.ws.readyState !== WebSocket.OPEN) return;
    conn.reconnectNow = true;
    conn.ws.close(1000, 'moving to another instance');
  }

  /** The socket of a moving lease closed: it waits, still running, to be claimed on the next one. */
  holdForMove(lease: LeaseState): void {
    lease.moving = true;
    // A final report sent but not answered goes out again on the new socket. If the old
    // instance did handle it, the run has ended and the new one does not take the lease back.
    if (lease.phase === 'reporting' && lease.finalIndex !== undefined) {
      clearTimeout(lease.finalTimer);
      lease.finalIndex = undefined;
    }
    if (lease.conn.protocol >= DELTA_SEQ_PROTOCOL) lease.unacked.push(...lease.unanswered.filter((f) => f.type === 'output'));
    lease.sent = 0;
    lease.answered = 0;
    lease.unanswered = [];
    // No answer will come on the closed socket to release the deltas waiting for one.
    this.runner.flushOutput(lease);
    this.moving.add(lease);
    this.deadline ??= setTimeout(() => this.loseMoves(`not taken back within the lease TTL (${this.leaseTtlMs} ms)`), this.leaseTtlMs);
  }

  /** Applies the new instance's answer to the claims: resumed leases carry on here, the others are lost. */
  settle(conn: Connection, frame: IncomingFrame): void {
    const resumed = new Set(Array.isArray(frame.resumed) ? frame.resumed : []);
    clearTimeout(this.deadline);
    this.deadline = undefined;
    const moves = [...this.moving];
    this.moving.clear();
    let lost = 0;
    for (const lease of moves) {
      lease.moving = false;
      if (!resumed.has(lease.info.lease_id)) {
        lost++;
        this.loseMoved(lease, 'the gateway did not take the lease back');
        continue;
      }
      lease.conn = conn;
      conn.leases.add(lease.info.lease_id);
      // Un-acked outputs first, as first sent; unnumbered here they could be logged twice, so
      // an instance older than protocol 4 does not get them (the text may miss them, as before).
      const unacked = lease.unacked.splice(0);
      if (conn.protocol >= DELTA_SEQ_PROTOCOL) for (const f of unacked) this.runner.sendLease(lease, f);
      for (const held of lease.held.splice(0)) this.runner.sendLease(lease, held);
      if (lease.phase === 'reporting' && lease.finalFrame && lease.finalIndex === undefined) void this.ctx.resignReceipt(lease).then(() => this.runner.sendFinal(lease));
    }
    this.ctx.log.info('leases moved to another gateway instance', { resumed: moves.length - lost, lost });
  }

  loseMoves(reason: string): void {
    clearTimeout(this.deadline);
    this.deadline = undefined;
    const moves = [...this.moving];
    this.moving.clear();
    for (const lease of moves) {
      lease.moving = false;
      this.loseMoved(lease, reason);
    }
    this.ctx.checkStopped();
  }

  /** A lease that did not survive the move: its handler is aborted and nothing more is reported. */
  private loseMoved(lease: LeaseState, reason: string): void {
    lease.held = [];
    lease.unacked = [];
    lease.lostInMove = `lost in the move to another gateway instance: ${reason}`;
    this.ctx.log.warn('lease lost in the move to another instance', { lease_id: lease.info.lease_id, run_id: lease.info.run_id, reason });
    if (lease.phase === 'pending') return this.runner.drop(lease, lease.lostInMove);
    if (lease.phase === 'reporting') return lease.onFinalAnswer?.({ ok: false, code: 'stale_lease', message: lease.lostInMove });
    this.runner.abortLease(lease, 'stale');
  }
}
