import { SwitchyardApiError, type JobEvent } from '../../../sdk/client/index.js';
import { client } from '../lib/gateway.js';

/** Where the page's event stream is: what the connection note says. */
export type Connection = 'connecting' | 'live' | 'reconnecting' | 'ended' | 'failed';

export interface FollowerHandlers {
  event(ev: JobEvent): void;
  connection(state: Connection, detail?: { retryInMs?: number; error?: unknown }): void;
}

const FIRST_DELAY_MS = 500;
const MAX_DELAY_MS = 15_000;

/**
 * Follows a run's events (GET /v1/jobs/{id}/events) from its first logged event to `done`.
 *
 * The client library's stream resumes by itself, but silently; the page must say it is
 * reconnecting, so each connection is one stream with no reconnects of its own
 * (`maxReconnects: 0`) and this loop does the reconnecting: it keeps the last event id the page
 * took and opens the next stream after it (Last-Event-ID), so no log line or text delta is lost
 * or shown twice, with a backoff that doubles up to 15 s and starts again once events flow.
 * Starting at id 0 replays the whole log: a finished run's lines and text come from there.
 */
export class RunFollower {
  private lastEventId = 0;
  private readonly abort = new AbortController();

  constructor(
    private readonly runId: string,
    private readonly on: FollowerHandlers,
  ) {}

  /** Runs until `done`, a refusal (404, 401), or stop(). */
  async run(): Promise<void> {
    let delay = FIRST_DELAY_MS;
    let state: Connection = 'connecting';
    this.on.connection(state);
    const signal = this.abort.signal;
    while (!signal.aborted) {
      const stream = client().stream(this.runId, { lastEventId: this.lastEventId, maxReconnects: 0, signal });
      try {
        for await (const ev of stream) {
          if (Number.isFinite(ev.id)) this.lastEventId = ev.id;
          if (state !== 'live') this.on.connection((state = 'live'));
          delay = FIRST_DELAY_MS;
          this.on.event(ev);
          if (ev.event === 'done') {
            this.on.connection('ended');
            return;
          }
        }
      } catch (err) {
        if (signal.aborted) return;
        if (err instanceof SwitchyardApiError && !err.retryable) {
          this.on.connection('failed', { error: err });
          return;
        }
        this.on.connection((state = 'reconnecting'), { retryInMs: delay, error: err });
      }
      await sleep(delay, signal);
      delay = Math.min(delay * 2, MAX_DELAY_MS);
    }
  }

  stop(): void {
    this.abort.abort();
  }
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const t = setTimeout(resolve, ms);
    signal.addEventListener('abort', () => (clearTimeout(t), resolve()), { once: true });
  });
}
