import http from 'node:http';

/** Where streaming chat completions go: the full URL of `/chat/completions`, headers, model and tokens. */
export interface ChatTarget {
  url: string;
  headers: Record<string, string>;
  model: string;
  /** Content chunks each completion asks for (`max_tokens`: every source here sends one word per token). */
  tokens: number;
  /** Fewer tokens (words of content) than this make a completion an error. @defaultValue tokens */
  expectTokens?: number;
}

/** What a window of the load saw. */
export interface ChatWindow {
  seconds: number;
  /** Content chunks (non-empty `delta.content`) received during the window. */
  tokens: number;
  /** Completions that ended with `data: [DONE]` during the window. */
  completions: number;
  /** Request sent -> first content chunk received, ms, ascending, of completions sent during the window. */
  ttftMs: number[];
  /** Non-200 answers, connection errors, streams that ended without [DONE] or short of `tokens`. */
  errors: number;
  firstError?: string;
}

/**
 * `concurrency` closed loops of streaming chat completions (`stream: true`), each sending the
 * next as soon as the last ended, over keep-alive node:http sockets and a minimal SSE reader
 * (one JSON.parse per frame), in this process. `window()` measures a stretch of it.
 */
export class ChatStreamLoad {
  private readonly agent: http.Agent;
  private readonly body: string;
  private running = true;
  private loops: Promise<void>[] = [];
  private tokens = 0;
  private completions = 0;
  private errors = 0;
  private firstError?: string;
  private recording = false;
  private ttft: number[] = [];

  constructor(private readonly target: ChatTarget, concurrency: number) {
    this.agent = new http.Agent({ keepAlive: true, maxSockets: concurrency });
    this.body = JSON.stringify({ model: target.model, messages: [{ role: 'user', content: 'Say something.' }], stream: true, max_tokens: target.tokens });
    this.loops = Array.from({ length: concurrency }, () => this.loop());
  }

  /** Starts a measured window; the returned function ends it. */
  window(): () => ChatWindow {
    const from = { at: performance.now(), tokens: this.tokens, completions: this.completions, errors: this.errors };
    this.ttft = [];
    this.recording = true;
    return () => {
      this.recording = false;
      return {
        seconds: (performance.now() - from.at) / 1000,
        tokens: this.tokens - from.tokens,
        completions: this.completions - from.completions,
        ttftMs: this.ttft.sort((a, b) => a - b),
        errors: this.errors - from.errors,
        firstError: this.firstError,
      };
    };
  }

  /** Lets the completions in flight end, then closes the sockets. */
  async stop(): Promise<void> {
    this.running = false;
    await Promise.all(this.loops);
    this.agent.destroy();
  }

  private async loop(): Promise<void> {
    while (this.running) {
      try {
        await this.one();
      } catch (err) {
        this.fail((err as Error).message);
        await new Promise((r) => setTimeout(r, 50));
      }
    }
  }

  private fail(why: string): void {
    this.errors++;
    this.firstError ??= why;
  }

  private one(): Promise<void> {
    const sentAt = performance.now();
    const recorded = this.recording;
    return new Promise<void>((resolve, reject) => {
      const req = http.request(this.target.url, { method: 'POST', agent: this.agent, headers: { ...this.target.headers, 'content-type': 'application/json', 'content-length': Buffer.byteLength(this.body) } }, (res) => {
        res.setEncoding('utf8');
        if (res.statusCode !== 200) {
          let text = '';
          res.on('data', (c: string) => (text += c));
          res.on('end', () => reject(new Error(`${res.statusCode} ${text.slice(0, 300)}`)));
          return;
        }
        let buffer = '';
        let got = 0;
        let done = false;
        res.on('data', (c: string) => {
          buffer += c;
          let end: number;
          while ((end = buffer.indexOf('\n\n')) >= 0) {
            const frame = buffer.slice(0, end);
            buffer = buffer.slice(end + 2);
            if (!frame.startsWith('data: ')) continue; // comments (pings), other fields
            const data = frame.slice(6);
            if (data === '[DONE]') {
              done = true;
              continue;
            }
            const chunk = JSON.parse(data) as { choices?: Array<{ delta?: { content?: string } }>; error?: { message?: string } };
            if (chunk.error) this.fail(`error chunk: ${chunk.error.message}`);
            const content = chunk.choices?.[0]?.delta?.content;
            if (!content) continue;
            if (got === 0 && recorded) this.ttft.push(performance.now() - sentAt);
            // Every source here sends one word per token; a worker that coalesces its deltas
            // sends several in one chunk, so tokens are counted as words, not chunks.
            const words = countWords(content);
            got += words;
            this.tokens += words;
          }
        });
        res.on('end', () => {
          const expected = this.target.expectTokens ?? this.target.tokens;
          if (!done || got < expected) this.fail(`stream ended ${done ? 'with' : 'without'} [DONE] after ${got} of ${expected} tokens`);
          else this.completions++;
          resolve();
        });
        res.on('error', reject);
      });
      req.on('error', reject);
      req.end(this.body);
    });
  }
}

function countWords(text: string): number {
  let n = 0;
  for (const w of text.split(/\s+/)) if (w) n++;
  return Math.max(1, n);
}
