import type { ServerResponse } from 'node:http';
import type { RunRecord } from '../../models/types.js';
import type { LiveEvent } from './live-event.js';
import type { RunFollower } from './run-follower.js';

export interface SseStreamsOptions {
  follower: RunFollower;
  /** @defaultValue 15000 (CONTRACT: a ping at least every 15 s) */
  pingMs: number;
  /** Unsent bytes a client may hold before it is cut off; it resumes with Last-Event-ID. */
  bufferBytes: number;
  /** The reconnect delay suggested to EventSource clients. @defaultValue 1000 */
  retryMs?: number;
}

interface Stream {
  res: ServerResponse;
  stop?: () => void;
  /** While the backlog is replayed, writes wait for the client instead of cutting it off. */
  replaying: boolean;
}

/**
 * The process's open SSE responses. One timer pings them all (not a timer per client), a
 * client that stops reading is cut off at the buffer limit instead of growing the heap,
 * and shutdown ends every stream with a retry hint.
 */
export class SseStreams {
  private readonly streams = new Set<Stream>();
  private pinger?: NodeJS.Timeout;

  constructor(private readonly opts: SseStreamsOptions) {}

  get size(): number {
    return this.streams.size;
  }

  start(): void {
    this.pinger = setInterval(() => {
      for (const s of this.streams) this.write(s, ': ping\n\n');
    }, this.opts.pingMs);
    this.pinger.unref();
  }

  /** Ends every stream; clients reconnect (elsewhere) after the retry delay. */
  stop(): void {
    clearInterval(this.pinger);
    for (const s of this.streams) this.close(s);
  }

  /** Takes over `res`: headers, then the run's events until `done` or the client leaves. */
  async open(res: ServerResponse, run: RunRecord, after: number | null): Promise<void> {
    res.writeHead(200, {
      'Content-Type': 'text/event-stream; charset=utf-8',
      'Cache-Control': 'no-cache, no-transform',
      Connection: 'keep-alive',
      // Reverse proxies (nginx) must not buffer the stream.
      'X-Accel-Buffering': 'no',
    });
    res.socket?.setNoDelay(true);
    res.socket?.setTimeout(0);
    const stream: Stream = { res, replaying: true };
    this.streams.add(stream);
    res.once('close', () => this.close(stream));
    this.write(stream, `retry: ${this.opts.retryMs ?? 1000}\n\n`);
    try {
      const stop = await this.opts.follower.follow(run, after, {
        send: (e: LiveEvent) => this.write(stream, e.sse),
        end: () => this.close(stream),
        drained: () => this.drained(stream),
      });
      stream.replaying = false;
      if (this.streams.has(stream)) stream.stop = stop;
      else stop();
    } catch {
      // Redis went away mid-setup: the client reconnects with Last-Event-ID and resumes.
      this.close(stream);
    }
  }

  private write(stream: Stream, text: string): void {
    const { res } = stream;
    if (res.writableEnded || res.destroyed) return;
    res.write(text);
    // A client that does not read live events: drop it rather than buffer without bound.
    if (!stream.replaying && res.writableLength > this.opts.bufferBytes) res.destroy();
  }

  /** Resolves once the client has taken most of what was written (or is gone). */
  private drained(stream: Stream): Promise<void> | undefined {
    const { res } = stream;
    if (res.writableLength <= this.opts.bufferBytes || res.destroyed) return undefined;
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

  private close(stream: Stream): void {
    if (!this.streams.delete(stream)) return;
    stream.stop?.();
    if (!stream.res.writableEnded && !stream.res.destroyed) stream.res.end();
  }
}
