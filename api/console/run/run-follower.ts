import { SwitchyardApiError, SwitchyardClient, type JobEvent } from '../../../sdk/client/index.js';
import { authedFetch, gatewayBase } from '../lib/gateway.js';
import { getSession } from '../lib/session.js';

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
  private state: Connection = 'connecting';
  /**
   * The client library, with a fetch that says when a stream's answer arrived: a queued run's
   * log may be empty for a long time, and the page is live from the moment it is connected.
   */
  private readonly client = new SwitchyardClient({
    baseUrl: gatewayBase,
    apiKey: getSession()?.apiKey,
    fetch: async (input, init) => {
      const res = await authedFetch(input, init);
      if (res.ok && (res.headers.get('content-type') ?? '').startsWith('text/event-stream')) this.set('live');
      return res;
    },
  });

  constructor(
    private readonly runId: string,
    private readonly on: FollowerHandlers,
  ) {}

  /** Runs until `done`, a refusal (404, 401), or stop(). */
  async run(): Promise<void> {
    let delay = FIRST_DELAY_MS;
    this.on.connection(this.state);
    const signal = this.abort.signal;
    while (!signal.aborted) {
      const stream = this.client.stream(this.runId, { lastEventId: this.lastEventId, maxReconnects: 0, signal });
      try {
        for await (const ev of stream) {
          if (Number.isFinite(ev.id)) this.lastEventId = ev.id;
          delay = FIRST_DELAY_MS;
          this.on.event(ev);
          if (ev.event === 'done') {
            this.set('ended');
            return;
          }
        }
      } catch (err) {
        if (signal.aborted) return;
        if (err instanceof SwitchyardApiError && !err.retryable) {
          this.set('failed', { error: err });
          return;
        }
        this.set('reconnecting', { retryInMs: delay, error: err });
      }
      await sleep(delay, signal);
      delay = Math.min(delay * 2, MAX_DELAY_MS);
    }
  }

  private set(state: Connection, detail?: { retryInMs?: number; error?: unknown }): void {
    if (state === this.state && state === 'live') return;
    this.state = state;
    this.on.connection(state, detail);
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
