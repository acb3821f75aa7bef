import type { DeltaGuard, RunEventLog, RunEventName } from '../../../models/run-event-log.js';

export type NewRunEvent = { event: RunEventName; data: unknown; guard?: DeltaGuard };

interface Waiting {
  events: NewRunEvent[];
  resolve: () => void;
  reject: (err: unknown) => void;
}

interface RunQueue {
  waiting: Waiting[];
  /** Settles once everything queued so far is written or refused. */
  idle: Promise<void>;
}

/** Events per log call at most: keeps one Lua call (which blocks Redis) short. */
const MAX_BATCH_EVENTS = 256;
/** Pauses before a batch Redis refused goes again, holding the events behind it. */
const RETRY_DELAYS_MS = [20, 100, 400];
/** Retries start only this soon after the first attempt: a refusal that lasts goes back to the senders. */
const RETRY_WINDOW_MS = 1_000;
/**
 * Redis answered, but cannot take writes just now (loading, a failover, a busy script). A lost
 * connection is not retried here: the outage lasts seconds, the senders retry with their own
 * backoff, and a worker socket's other frames should not wait behind it.
 */
const REFUSED_FOR_NOW = /^(LOADING|READONLY|BUSY|TRYAGAIN|CLUSTERDOWN|MASTERDOWN)\b/;

/**
 * Group commit of a run's events: while one append of a run is in flight, the run's next events
 * wait and go out together as ONE log call when it returns. No timer: at low load every event
 * goes at once (first-token latency is one round trip), under load the batches grow with it
 * (one Lua call and one PUBLISH for many LLM deltas). Each caller's promise settles when its
 * own events are in the log, so "acknowledged" still means "durable".
 *
 * `append` queues synchronously: events are logged in the order of the calls.
 */
export class RunAppendQueue {
  private readonly runs = new Map<string, RunQueue>();

  constructor(
    private readonly log: RunEventLog,
    private readonly retryDelaysMs: readonly number[] = RETRY_DELAYS_MS,
  ) {}

  append(runId: string, events: NewRunEvent[]): Promise<void> {
    return new Promise((resolve, reject) => {
      const queued = this.runs.get(runId);
      if (queued) {
        queued.waiting.push({ events, resolve, reject });
        return;
      }
      const q: RunQueue = { waiting: [{ events, resolve, reject }], idle: Promise.resolve() };
      this.runs.set(runId, q);
      q.idle = this.drain(runId, q);
    });
  }

  /** Resolves once the events queued for the run so far are written (or refused). */
  settled(runId: string): Promise<void> {
    return this.runs.get(runId)?.idle ?? Promise.resolve();
  }

  private async drain(runId: string, q: RunQueue): Promise<void> {
    while (q.waiting.length > 0) {
      const batch = take(q.waiting);
      try {
        await this.write(runId, batch.flatMap((w) => w.events));
        for (const w of batch) w.resolve();
      } catch (err) {
        // Everything queued behind a refused batch is refused with it: written after it, it
        // would overtake the events its senders now send again.
        for (const w of [...batch, ...q.waiting.splice(0)]) w.reject(err);
      }
    }
    this.runs.delete(runId);
  }

  /** A passing refusal is waited out here, with the run's later events held behind the batch. */
  private async write(runId: string, events: NewRunEvent[]): Promise<void> {
    const start = Date.now();
    for (let attempt = 0; ; attempt++) {
      try {
        await this.log.append(runId, events);
        return;
      } catch (err) {
        const refused = err instanceof Error && REFUSED_FOR_NOW.test(err.message);
        if (!refused || attempt >= this.retryDelaysMs.length || Date.now() - start > RETRY_WINDOW_MS) throw err;
        await new Promise((r) => setTimeout(r, this.retryDelaysMs[attempt]));
      }
    }
  }
}

/** The longest run of waiting callers whose events fit one call (at least one caller). */
function take(waiting: Waiting[]): Waiting[] {
  let n = 0;
  let count = 0;
  while (n < waiting.length && (n === 0 || count + waiting[n].events.length <= MAX_BATCH_EVENTS)) count += waiting[n++].events.length;
  return waiting.splice(0, n);
}
