import http from 'node:http';

export interface SseFrame {
  id: number;
  event: string;
  data: any;
}

/**
 * A bare SSE reader over node:http: every frame in order, comments counted, and the socket
 * at hand, so a test can stop reading (a slow client) or see exactly when the server closes.
 */
export class SseClient {
  readonly frames: SseFrame[] = [];
  comments = 0;
  status = 0;
  req!: http.ClientRequest;
  res?: http.IncomingMessage;
  closed!: Promise<void>;
  private buffer = '';
  private waiters: Array<() => void> = [];

  constructor(
    readonly url: string,
    readonly key: string,
    readonly opts: { lastEventId?: number; agent?: http.Agent } = {},
  ) {}

  open(): Promise<this> {
    return new Promise((resolve, reject) => {
      const headers: Record<string, string> = { accept: 'text/event-stream', authorization: `Bearer ${this.key}` };
      if (this.opts.lastEventId !== undefined) headers['last-event-id'] = String(this.opts.lastEventId);
      this.req = http.get(this.url, { headers, agent: this.opts.agent ?? false }, (res) => {
        this.res = res;
        this.status = res.statusCode ?? 0;
        res.setEncoding('utf8');
        this.closed = new Promise((done) => res.once('close', () => (this.notify(), done())));
        res.on('data', (chunk: string) => this.feed(chunk));
        res.on('error', () => {});
        resolve(this);
      });
      this.req.once('error', reject);
    });
  }

  private feed(chunk: string): void {
    this.buffer += chunk;
    let end: number;
    while ((end = this.buffer.indexOf('\n\n')) >= 0) {
      const block = this.buffer.slice(0, end);
      this.buffer = this.buffer.slice(end + 2);
      const frame: Partial<SseFrame> & { raw?: string } = {};
      for (const line of block.split('\n')) {
        if (line.startsWith(':')) this.comments++;
        else if (line.startsWith('id: ')) frame.id = Number(line.slice(4));
        else if (line.startsWith('event: ')) frame.event = line.slice(7);
        else if (line.startsWith('data: ')) frame.data = JSON.parse(line.slice(6));
      }
      if (frame.event) this.frames.push(frame as SseFrame);
    }
    this.notify();
  }

  private notify(): void {
    for (const w of this.waiters.splice(0)) w();
  }

  /** Resolves when `pred` holds over the frames so far (checked on each chunk). */
  async until(pred: (c: this) => boolean, timeoutMs = 10_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!pred(this)) {
      if (Date.now() > deadline) throw new Error(`SSE client: timed out; frames so far: ${this.frames.map((f) => `${f.id}:${f.event}`).join(' ')}`);
      await new Promise<void>((r) => {
        this.waiters.push(r);
        setTimeout(r, 100);
      });
    }
  }

  close(): void {
    this.req.destroy();
  }
}
