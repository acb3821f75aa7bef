import type { Logger } from 'pino';
import { decodePipelineFrame, PIPELINE_HEADER_BYTES, PipelineFrameError, writePipelineHeader, type ErrorFrame } from '../../sdk/protocol/index.js';
import type { ConnectedWorker } from '../connected-worker.js';
import type { DispatchObserver } from '../dispatch-observer.js';
import type { ActiveLease, LeaseTable } from '../lease-table.js';
import type { PipelineBus } from './pipeline-bus.js';
import { nextRank, type Pipeline } from './pipeline.js';

export interface FrameRouterOptions {
  table: Pick<LeaseTable, 'get'>;
  bus: Pick<PipelineBus, 'frame' | 'ack'>;
  gatewayId: string;
  /** Bytes held for one receiving rank before its senders are paused (RANK_BUFFER_BYTES). */
  bufferBytes: number;
  /**
   * A frame broke its pipeline: `fromHere`, its sender (this lease's worker) sent it out of order
   * or after its end; otherwise a frame from another instance for this lease never came.
   */
  broken(lease: ActiveLease, why: string, fromHere: boolean): void;
  metrics?: DispatchObserver;
  log: Logger;
}

/**
 * Carries a pipeline's activation frames from rank to rank (docs/ranks.md, "The activation
 * path"): a frame from rank i goes to rank i+1 (the last rank's back to rank 0) with its header
 * rewritten for the receiver, straight to its socket when the receiver is on this instance,
 * through the receiver's instance otherwise (`PipelineBus`, which copies it once into its pub/sub
 * message). The router never copies or parses the payload.
 *
 * Back-pressure: per receiving rank, the bytes handed to its socket (or sent to its instance) and
 * not yet written out are counted; past `bufferBytes` the sender's socket stops being read (TCP
 * then slows the sender), and it is read again once half of them are out. So a slow rank holds
 * at most about one buffer of the gateway's memory, whatever its senders do.
 */
export class FrameRouter {
  /** Receiving lease id -> bytes on their way to its worker. */
  private readonly inflight = new Map<string, number>();
  /** Receiving lease id -> the senders paused for it. */
  private readonly waiting = new Map<string, Set<ConnectedWorker>>();
  /** Receiving lease id on another instance -> the last `seq` given to a frame for it. */
  private readonly remoteSeq = new Map<string, number>();

  constructor(private readonly opts: FrameRouterOptions) {}

  /** A binary frame from a worker: forwarded, or the error frame to answer it with. */
  fromWorker(worker: ConnectedWorker, data: Buffer): ErrorFrame | null {
    let frame;
    try {
      frame = decodePipelineFrame(data);
    } catch (err) {
      if (!(err instanceof PipelineFrameError)) throw err;
      return { type: 'error', code: 'bad_frame', of: 'frame', message: err.message };
    }
    const lease = this.opts.table.get(frame.leaseId);
    const rank = lease?.rank;
    if (!lease || !rank || lease.worker !== worker || lease.fence !== frame.fence || lease.closing || rank.pipeline.ended) {
      return { type: 'error', code: 'stale_lease', of: 'frame', lease_id: frame.leaseId, message: 'this rank lease is no longer yours (its pipeline ended, or it is of another attempt): drop its work' };
    }
    const why = rank.streamEnded ? 'a frame came after its sender\'s end frame' : frame.seq !== rank.sentSeq + 1 ? `frame seq ${frame.seq} came where ${rank.sentSeq + 1} was due` : null;
    if (why) {
      this.opts.broken(lease, why, true);
      return { type: 'error', code: 'bad_frame', of: 'frame', lease_id: lease.id, message: `${why}: the pipeline is broken and ends` };
    }
    rank.sentSeq = frame.seq;
    if (frame.end) rank.streamEnded = true;
    this.forward(lease, data, frame.end);
    return null;
  }

  /** Ends a rank's stream for it (it reported `complete` without its end frame). */
  endStream(lease: ActiveLease): void {
    const rank = lease.rank;
    if (!rank || rank.streamEnded) return;
    rank.streamEnded = true;
    // A header alone: the end frame with an empty payload, its header written by `forward`.
    this.forward(lease, Buffer.alloc(PIPELINE_HEADER_BYTES), true);
  }

  /** A frame from another instance for a rank lease held here (its header already the receiver's). */
  fromInstance(data: Buffer, from: string): void {
    let frame;
    try {
      frame = decodePipelineFrame(data);
    } catch (err) {
      this.opts.log.warn({ err, from }, 'dropped a malformed pipeline frame from another instance');
      return;
    }
    const to = this.opts.table.get(frame.leaseId);
    const rank = to?.rank;
    if (!to || !rank || to.fence !== frame.fence || to.closing || rank.pipeline.ended) {
      this.opts.bus.ack(from, frame.leaseId, data.length);
      return;
    }
    if (frame.seq !== rank.receivedSeq + 1) {
      this.opts.bus.ack(from, frame.leaseId, data.length);
      this.opts.broken(to, `frame ${rank.receivedSeq + 1} from another instance was lost`, false);
      return;
    }
    rank.receivedSeq = frame.seq;
    const n = data.length;
    this.deliver(to, data, () => this.opts.bus.ack(from, to.id, n));
  }

  /** `bytes` for `leaseId` reached its worker's socket on another instance. */
  acked(leaseId: string, bytes: number): void {
    this.drained(leaseId, bytes);
  }

  /** A pipeline ended: its receivers' counts go, and the senders waiting on them are read again. */
  forget(pipeline: Pipeline): void {
    for (const m of pipeline.members) {
      this.inflight.delete(m.leaseId);
      this.remoteSeq.delete(m.leaseId);
      this.resume(m.leaseId);
    }
  }

  /** The bytes of frames held for receivers now (what back-pressure bounds). */
  get heldBytes(): number {
    let n = 0;
    for (const v of this.inflight.values()) n += v;
    return n;
  }

  private forward(from: ActiveLease, data: Buffer, end: boolean): void {
    const { pipeline, index } = from.rank!;
    const dest = pipeline.members[nextRank(index, pipeline.count)];
    // A rank that finished takes nothing more (rank 0 after its end, the last rank's end coming back).
    if (dest.done) return;
    if (dest.gatewayId === this.opts.gatewayId) {
      const to = this.opts.table.get(dest.leaseId);
      if (!to?.rank || to.closing) return;
      writePipelineHeader(data, to.id, pipeline.fence, ++to.rank.receivedSeq, end);
      this.count(to.id, data.length, from.worker);
      this.opts.metrics?.framesForwarded?.('local', data.length);
      const n = data.length;
      this.deliver(to, data, () => this.drained(to.id, n));
      return;
    }
    const seq = (this.remoteSeq.get(dest.leaseId) ?? 0) + 1;
    this.remoteSeq.set(dest.leaseId, seq);
    writePipelineHeader(data, dest.leaseId, pipeline.fence, seq, end);
    this.count(dest.leaseId, data.length, from.worker);
    this.opts.metrics?.framesForwarded?.('instance', data.length);
    this.opts.bus.frame(dest.gatewayId, data);
  }

  /** Sends a rank lease its lease frame, then the frames that came for it meanwhile. */
  start(lease: ActiveLease): void {
    const rank = lease.rank!;
    if (rank.started) return;
    rank.started = true;
    lease.worker.send(rank.leaseFrame);
    for (const { data, written } of rank.queued ?? []) this.write(lease, data, written);
    rank.queued = undefined;
  }

  /** To the receiver's socket, or held until its lease frame has gone out. */
  private deliver(to: ActiveLease, data: Buffer, written: () => void): void {
    if (to.rank!.started) this.write(to, data, written);
    else (to.rank!.queued ??= []).push({ data, written });
  }

  private write(to: ActiveLease, data: Buffer, written: () => void): void {
    const send = to.worker.link?.sendBinary;
    if (!send) return written();
    send(data, () => written());
  }

  /** Counts bytes on their way to `leaseId`; past the buffer, the sender waits. */
  private count(leaseId: string, bytes: number, sender: ConnectedWorker): void {
    const now = (this.inflight.get(leaseId) ?? 0) + bytes;
    this.inflight.set(leaseId, now);
    if (now <= this.opts.bufferBytes) return;
    let senders = this.waiting.get(leaseId);
    if (!senders) this.waiting.set(leaseId, (senders = new Set()));
    senders.add(sender);
    sender.pausedBy ??= new Set();
    if (sender.pausedBy.size === 0) sender.link?.pause?.();
    sender.pausedBy.add(leaseId);
  }

  private drained(leaseId: string, bytes: number): void {
    const left = (this.inflight.get(leaseId) ?? 0) - bytes;
    if (!this.inflight.has(leaseId)) return;
    if (left <= 0) this.inflight.delete(leaseId);
    else this.inflight.set(leaseId, left);
    if (left <= this.opts.bufferBytes / 2) this.resume(leaseId);
  }

  private resume(leaseId: string): void {
    const senders = this.waiting.get(leaseId);
    if (!senders) return;
    this.waiting.delete(leaseId);
    for (const s of senders) {
      s.pausedBy?.delete(leaseId);
      if (s.pausedBy?.size === 0) s.link?.resume?.();
    }
  }
}
