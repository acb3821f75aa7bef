import http from 'node:http';
import type { FollowerRecord } from './history.js';

/**
 * Follows one run's events as EventSource does: the first connection asks for the whole log
 * (`Last-Event-ID: 0`), and whenever a connection ends before `done` (a cut proxy, a killed
 * gateway) it reconnects, to either front door, with `Last-Event-ID` = the last id it saw.
 * Everything it receives is recorded, unfiltered, so the checker can see a duplicate or a
 * reordering exactly as a client would have.
 */
export class SseFollower {
  readonly record: FollowerRecord;
  private stopped = false;
  private req: http.ClientRequest | null = null;
  readonly finished: Promise<void>;

  constructor(
    private readonly fronts: string[],
    private readonly apiKey: string,
    runId: string,
  ) {
    this.record = { runId, events: [], resumes: 0, sawDone: false };
    this.finished = this.follow();
  }

  stop(): void {
    this.stopped = true;
    this.req?.destroy();
  }

  private async follow(): Promise<void> {
    let connection = 0;
    while (!this.stopped && !this.record.sawDone) {
      const last = this.record.events.at(-1)?.id ?? 0;
      if (connection > 0) this.record.resumes++;
      await this.connect(this.fronts[connection % this.fronts.length], last, connection);
      connection++;
      if (!this.record.sawDone && !this.stopped) await new Promise((r) => setTimeout(r, 200));
    }
  }

  /** One connection; resolves when it ends, however it ends. */
  private connect(front: string, lastId: number, connection: number): Promise<void> {
    return new Promise((resolve) => {
      const headers = { accept: 'text/event-stream', authorization: `Bearer ${this.apiKey}`, 'last-event-id': String(lastId) };
      const req = http.get(`${front}/v1/jobs/${this.record.runId}/events`, { headers, agent: false, timeout: 15_000 }, (res) => {
        if (res.statusCode !== 200) {
          res.resume();
          res.once('end', resolve);
          res.once('error', () => resolve());
          return;
        }
        res.setEncoding('utf8');
        let buffer = '';
        res.on('data', (chunk: string) => {
          buffer += chunk;
          let end: number;
          while ((end = buffer.indexOf('\n\n')) >= 0) {
            const block = buffer.slice(0, end);
            buffer = buffer.slice(end + 2);
            let id: number | undefined;
            let event: string | undefined;
            for (const line of block.split('\n')) {
              if (line.startsWith('id: ')) id = Number(line.slice(4));
              else if (line.startsWith('event: ')) event = line.slice(7);
            }
            // A frame cut before its blank line never reaches here: a client ignores it too.
            if (id !== undefined && event) {
              this.record.events.push({ id, event, connection });
              if (event === 'done') this.record.sawDone = true;
            }
          }
        });
        res.once('close', () => resolve());
        res.once('error', () => resolve());
      });
      this.req = req;
      req.once('timeout', () => req.destroy());
      req.once('error', () => resolve());
    });
  }
}
