import type { ServerResponse } from 'node:http';
import type { RunRecord } from '../../models/types.js';
import type { LiveEvent } from '../services/events/live-event.js';
import type { RunEventSink, RunFollower } from '../services/events/run-follower.js';

export interface SseStreamsOptions {
  follower: RunFollower;
  /** @defaultValue 15000 (docs/events.md: a ping at least every 15 s) */
  pingMs: number;
  /** Unsent bytes a client may hold before it is cut off; it resumes with Last-Event-ID. */
  bufferBytes: number;
  /** The reconnect delay suggested to EventSource clients. @defaultValue 1000 */
  retryMs?: number;
}

/**
 * One open response. It is also the follower's sink, so following costs one object per
 * client rather than an object and a closure per callback.
 */
class Stream implements RunEventSink {
  stop?: () => void;
  /** While the backlog is replayed, writes wait for the client instead of cutting it off. */
  replaying = true;

  constructor(
    readonly res: ServerResponse,
    /** The ping slice it belongs to (the set it is in while open). */
    readonly slice: Set<Stream>,
    private readonly bufferBytes: number,
  ) {}

  write(text: string): void {
    const { res } = this;
    if (res.writableEnded || res.destroyed) return;
    res.write(text);
    // A client that does not read live events: drop it rather than buffer without bound.
    if (!this.replaying && res.writableLength > this.bufferBytes) res.destroy();
  }

  send(e: LiveEvent): void {
    this.write(e.sse);
  }

  /** Resolves once the client has taken most of what was written (or is gone). */
  drained(): Promise<void> | undefined {
    const { res } = this;
    if (res.writableLength <= this.bufferBytes || res.destroyed) return undefined;
    return new Promise((resolve) => {
      const done = () => {
        res.off('drain', done);
        res.off('close', done);
        resolve();
      };
      res.on('drain', done);
      res.on('close', done);
    });
  }

  end(): void {
    if (!this.slice.delete(this)) return;
    this.stop?.();
    if (!this.res.writableEnded && !this.res.destroyed) this.res.end();
  }
}

/** Streams are pinged a slice at a time, one slice about every this many ms. */
const PING_SLICE_MS = 250;

/**
 * The process's open SSE responses. One timer pings them all (not a timer per client), a
 * client that stops reading is cut off at the buffer limit instead of growing the heap,
 * and shutdown ends every stream with a retry hint.
 *
 * The streams are dealt round-robin into pingMs / 250 slices, and the timer pings one slice
 * per tick: every stream still gets a ping every pingMs, but 10,000 streams cost 60 short
 * ticks of ~170 writes each rather than one event-loop stall of 10,000 writes (~150 ms on
 * 2 cores, which every live event published meanwhile waited out).
 */
export class SseStreams {
  private readonly slices: Set<Stream>[];
  private nextSlice = 0;
  private pingTick = 0;
  private pinger?: NodeJS.Timeout;

  constructor(private readonly opts: SseStreamsOptions) {
    const count = Math.max(1, Math.floor(opts.pingMs / PING_SLICE_MS));
    this.slices = Array.from({ length: count }, () => new Set<Stream>());
  }

  get size(): number {
    let n = 0;
    for (const slice of this.slices) n += slice.size;
    return n;
  }

  start(): void {
    this.pinger = setInterval(() => {
      for (const s of this.slices[this.pingTick++ % this.slices.length]) s.write(': ping\n\n');
    }, this.opts.pingMs / this.slices.length);
    this.pinger.unref();
  }

  /**
   * Ends every stream with a retry hint: EventSource reconnects after it, through the load
   * balancer to another instance, and resumes with Last-Event-ID.
   */
  stop(): void {
    clearInterval(this.pinger);
    const hint = `retry: ${this.opts.retryMs ?? 1000}\n\n`;
    for (const slice of this.slices) {
      for (const s of slice) {
        s.write(hint);
        s.end();
      }
    }
  }

  /** Takes over `res`: headers, then the run's events until `done` or the client leaves. */
  open(res: ServerResponse, run: RunRecord, after: number | null): Promise<void> {
    return this.openWith(res, (sink) => this.opts.follower.follow(run, after, sink));
  }

  /** `open` with another source of events (a batch's: BatchFollower), which resolves with its stop. */
  async openWith(res: ServerResponse, follow: (sink: RunEventSink) => Promise<() => void>): Promise<void> {
    res.writeHead(200, {
      'Content-Type': 'text/event-stream; charset=utf-8',
      'Cache-Control': 'no-cache, no-transform',
      Connection: 'keep-alive',
      // Reverse proxies (nginx) must not buffer the stream.
      'X-Accel-Buffering': 'no',
    });
    res.socket?.setNoDelay(true);
    res.socket?.setTimeout(0);
    const stream = new Stream(res, this.slices[this.nextSlice++ % this.slices.length], this.opts.bufferBytes);
    stream.slice.add(stream);
    res.on('close', () => stream.end());
    stream.write(`retry: ${this.opts.retryMs ?? 1000}\n\n`);
    try {
      const stop = await follow(stream);
      stream.replaying = false;
      if (stream.slice.has(stream)) stream.stop = stop;
      else stop();
    } catch {
      // Redis went away mid-setup: the client reconnects with Last-Event-ID and resumes.
      stream.end();
    }
  }
}
