import type { ServerResponse } from 'node:http';

export interface ChunkStreamOptions {
  /** Interval of the `: ping` comment, so proxies keep a stream open while its job is queued. */
  pingMs: number;
  /** Unsent bytes a client may hold before it is cut off (its job is then canceled). */
  bufferBytes: number;
  /** Extra response headers (the run id). */
  headers?: Record<string, string>;
}

/**
 * One OpenAI-style event stream on a raw response: unnamed `data:` frames of JSON, comment
 * pings, and `data: [DONE]` at the end. The headers go out at once, before the first token,
 * so clients see the stream has started.
 */
export class ChunkStream {
  private readonly pinger: NodeJS.Timeout;

  constructor(private readonly res: ServerResponse, private readonly opts: ChunkStreamOptions) {
    res.writeHead(200, {
      ...opts.headers,
      'Content-Type': 'text/event-stream; charset=utf-8',
      'Cache-Control': 'no-cache, no-transform',
      Connection: 'keep-alive',
      // Reverse proxies (nginx) must not buffer the stream.
      'X-Accel-Buffering': 'no',
    });
    res.flushHeaders();
    res.socket?.setNoDelay(true);
    // The step's own timeout bounds the stream; the server's idle timeout must not cut it first.
    res.socket?.setTimeout(0);
    this.pinger = setInterval(() => this.write(': ping\n\n'), opts.pingMs);
    this.pinger.unref();
    res.once('close', () => clearInterval(this.pinger));
  }

  send(data: unknown): void {
    this.write(`data: ${JSON.stringify(data)}\n\n`);
  }

  /** The normal end: `[DONE]`, then close. */
  done(): void {
    this.write('data: [DONE]\n\n');
    this.end();
  }

  /** An error after the stream started: OpenAI clients throw on a data frame carrying `error`; no `[DONE]`. */
  fail(errorBody: unknown): void {
    this.send(errorBody);
    this.end();
  }

  private end(): void {
    clearInterval(this.pinger);
    if (!this.res.writableEnded && !this.res.destroyed) this.res.end();
  }

  private write(text: string): void {
    const { res } = this;
    if (res.writableEnded || res.destroyed) return;
    res.write(text);
    // A client that does not read: drop it rather than buffer without bound.
    if (res.writableLength > this.opts.bufferBytes) res.destroy();
  }
}
