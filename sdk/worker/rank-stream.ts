import type { EngineResult, RankContext } from '../engines/types.js';
import { decodePipelineFrame, encodePipelineFrame, type LeaseInfo, type LeaseRank, type PipelineFrame } from '../protocol/index.js';
import type { Connection } from './gateway-connection.js';
import type { WorkerLogger } from './logger.js';

const EMPTY = new Uint8Array(0);

/**
 * The frames of one rank lease (protocol 6, docs/worker-protocol.md, "Ranks"): what the rank
 * before sent, kept in order until the handler reads it, and what the handler sends on, numbered
 * 1, 2, 3... under the lease's own id and fence. The handler sees it as `ctx.rank`.
 *
 * Incoming frames are kept however many arrive before the handler reads them (a lease waiting
 * for a slot, a handler still loading its stage): the queue is not bounded here. The gateway
 * bounds what it holds for this worker (RANK_BUFFER_BYTES), not what this worker has read off its
 * socket, so what bounds the queue is the pace of the ranks before; a pipeline whose ranks each
 * wait for the answer to their last frame (an LLM's decode loop) keeps it at a frame or two.
 * Pausing the socket instead would also hold up the lease's acks and cancels.
 */
export class RankStream {
  readonly context: RankContext;
  private readonly queue: Uint8Array[] = [];
  /** Readers waiting for a frame (a handler may call `next()` again before the last one resolved). */
  private waiters: Array<() => void> = [];
  /** The seq of the last frame received. */
  private received = 0;
  /** The seq of the last frame sent. */
  private sent = 0;
  private incomingEnded = false;
  /** The incoming stream broke (a frame out of order): the next read throws this. */
  private broken: Error | null = null;
  private ending?: Promise<void>;
  /** The lease is over: what is still queued is dropped, and later frames are ignored. */
  private disposed = false;

  constructor(
    private readonly lease: Pick<LeaseInfo, 'lease_id' | 'fence' | 'run_id'>,
    rank: LeaseRank,
    private readonly signal: AbortSignal,
    /** Writes one binary frame to the lease's socket; resolves once it is written out. */
    private readonly write: (frame: Buffer) => Promise<void>,
    private readonly log: WorkerLogger,
  ) {
    // A handler waiting for a frame must not hang once the lease is aborted: the read throws.
    signal.addEventListener('abort', () => this.wake(), { once: true });
    this.context = {
      index: rank.index,
      count: rank.count,
      pipelineId: rank.pipeline_id,
      model: rank.model,
      workers: [...rank.workers],
      first: rank.index === 0,
      last: rank.index === rank.count - 1,
      frames: { [Symbol.asyncIterator]: () => ({ next: () => this.next(), return: async () => ({ done: true, value: undefined }) }) },
      send: (payload) => this.send(payload),
      end: () => this.end(),
    };
  }

  private get who(): string {
    return `rank ${this.context.index} of ${this.context.count}`;
  }

  /** A frame the gateway passed on from the rank before (from the last rank, for rank 0). */
  receive(frame: PipelineFrame): void {
    if (this.disposed || this.signal.aborted) return;
    const ids = { lease_id: this.lease.lease_id, run_id: this.lease.run_id, seq: frame.seq };
    if (frame.fence !== this.lease.fence) return this.log.warn('ignoring a pipeline frame of another fence', { ...ids, fence: frame.fence });
    if (this.incomingEnded || this.broken) return this.log.warn('ignoring a pipeline frame after the end of the incoming stream', ids);
    if (frame.seq !== this.received + 1) {
      // A frame skipped or repeated: what follows would not be what the rank before computed.
      this.broken = Object.assign(new Error(`${this.who}: pipeline frame ${frame.seq} arrived where ${this.received + 1} was next; the stream from the rank before is broken`), { code: 'pipeline_broken', retryable: true });
      this.log.warn('a pipeline frame out of order', ids);
    } else {
      this.received = frame.seq;
      // An end frame's payload, when it has one, is the stream's last.
      if (!frame.end || frame.payload.byteLength > 0) this.queue.push(frame.payload);
      if (frame.end) this.incomingEnded = true;
    }
    this.wake();
  }

  private async next(): Promise<IteratorResult<Uint8Array>> {
    for (;;) {
      if (this.signal.aborted) throw this.signal.reason;
      if (this.queue.length > 0) return { done: false, value: this.queue.shift()! };
      if (this.broken) throw this.broken;
      if (this.incomingEnded || this.disposed) return { done: true, value: undefined };
      await new Promise<void>((resolve) => this.waiters.push(resolve));
    }
  }

  private wake(): void {
    const waiters = this.waiters;
    this.waiters = [];
    for (const resolve of waiters) resolve();
  }

  private send(payload: Uint8Array): Promise<void> {
    if (this.signal.aborted) return handled(Promise.reject(this.signal.reason));
    if (this.ending) return handled(Promise.reject(new Error(`${this.who}: send() after end(): the stream has ended (a frame after its end breaks the pipeline)`)));
    if (!(payload instanceof Uint8Array)) return handled(Promise.reject(new TypeError(`${this.who}: send() takes a Uint8Array (a Buffer)`)));
    let frame: Buffer;
    try {
      frame = encodePipelineFrame({ leaseId: this.lease.lease_id, fence: this.lease.fence, seq: this.sent + 1, end: false, payload });
    } catch (err) {
      // Too large: the seq is not spent, so the stream stays whole.
      return handled(Promise.reject(err));
    }
    this.sent++;
    return handled(this.write(frame));
  }

  end(): Promise<void> {
    if (!this.ending) {
      // An aborted lease's pipeline is over already: there is nothing to end.
      if (this.signal.aborted) this.ending = Promise.resolve();
      else {
        this.sent++;
        this.ending = handled(this.write(encodePipelineFrame({ leaseId: this.lease.lease_id, fence: this.lease.fence, seq: this.sent, end: true, payload: EMPTY })));
      }
    }
    return this.ending;
  }

  /**
   * A rank before the last returned: its stream ends (if the handler did not end it), and its
   * lease completes with `{urls: []}`. Its artifacts would never reach the run, so returning any
   * is refused rather than dropped unseen; its `extra` is ignored.
   */
  async finish(result: EngineResult): Promise<void> {
    if (result.artifacts.length > 0) {
      throw Object.assign(new Error(`${this.who} returned ${result.artifacts.length} artifact(s): only the last rank's artifacts are the run's; a rank before it hands its work on with ctx.rank.send()`), { code: 'bad_result', retryable: false });
    }
    await this.end();
  }

  /** The lease is over: frames still queued are dropped, and a reader still waiting sees the stream end. */
  dispose(): void {
    this.disposed = true;
    this.queue.length = 0;
    this.wake();
  }
}

/**
 * Rejections are the caller's to see when it awaits; marked handled so a send left un-awaited
 * (the lease's abort says the same) cannot bring the process down as an unhandled rejection.
 */
function handled(p: Promise<void>): Promise<void> {
  p.catch(() => {});
  return p;
}

/**
 * A binary message from the gateway: a pipeline frame for one of the rank leases held on this
 * socket. Anything else is logged and dropped: a frame for a lease that has ended here (rank 0
 * gets the last rank's end after it completed) is no fault.
 */
export function routePipelineFrame(conn: Connection, data: Buffer, find: (leaseId: string) => { conn: Connection; rank?: RankStream } | undefined, log: WorkerLogger): void {
  let frame: PipelineFrame;
  try {
    frame = decodePipelineFrame(data);
  } catch (err) {
    return log.warn('ignoring a binary frame from the gateway that is not a pipeline frame', { err: (err as Error).message });
  }
  const lease = find(frame.leaseId);
  if (!lease?.rank || lease.conn !== conn) return log.debug('ignoring a pipeline frame for a lease this worker does not hold (ended, or never a rank lease)', { lease_id: frame.leaseId, seq: frame.seq });
  lease.rank.receive(frame);
}
