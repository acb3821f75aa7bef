import type { Logger } from 'pino';
import type { RunEventLog } from '../../../models/run-event-log.js';
import type { RunStore } from '../../../models/stores.js';
import { isTerminal, type RunRecord } from '../../../models/types.js';
import type { WebhookJobData, WebhookPayload, WebhookQueue } from '../../../queues/webhook-queue.js';
import { jobView } from '../../contract/presenters.js';

/** The webhook events a run's worker reports make: streamed text and log lines. */
export type StreamEvent = 'output' | 'logs';

/** A run's webhook as the stream events need it, or null: the run has none that asks for them. */
type Watch = { url: string; accountId: string; events: ReadonlySet<StreamEvent> } | null;

export interface StreamWebhooksOptions {
  queue: Pick<WebhookQueue, 'add'>;
  runs: Pick<RunStore, 'get'>;
  eventLog: Pick<RunEventLog, 'claim'>;
  /** At most one delivery of an event per run per window. @defaultValue 500 */
  windowMs?: number;
  log: Logger;
}

/** Runs remembered here, at most: beyond, the oldest are read again if they report. */
const MAX_WATCHED = 100_000;
/** Events one delivery carries at most; more wait for the next window. */
const MAX_EVENTS = 5_000;

const LOG_EVENT: Record<StreamEvent, string> = { output: 'output', logs: 'log' };
const TYPES: Record<StreamEvent, string> = { output: 'job.output', logs: 'job.logs' };

/**
 * The `output` and `logs` webhooks of runs (docs/webhooks.md, "Output and logs"), as Replicate
 * defines them: at most one delivery per run and event every `windowMs`, each carrying
 * everything the run logged of it since the last. A report (a delta, a log line) queues the
 * delivery of its window, due at the window's end, once (its job id names run, event and
 * window, so several instances queue it once between them). The delivery's first attempt takes
 * the events since the event's cursor from the run's event log, moving the cursor in the same
 * step, and keeps the body for its retries.
 *
 * Whether a run asks for them is learned from its status changes seen here, at no cost, or, for
 * a run that reports here first (its lease moved here, or its pipeline's last rank is here), by
 * reading it once.
 */
export class StreamWebhooks {
  private readonly watched = new Map<string, Watch | Promise<Watch>>();
  private readonly windows = new Map<string, number>();
  private readonly windowMs: number;

  constructor(private readonly opts: StreamWebhooksOptions) {
    this.windowMs = opts.windowMs ?? 500;
  }

  /** A status change: remembered while the run lives, forgotten once it ends. */
  statusChanged(run: RunRecord): void {
    if (isTerminal(run.status)) {
      this.watched.delete(run.run_id);
      for (const e of ['output', 'logs'] as const) this.windows.delete(`${run.run_id}\n${e}`);
    } else this.remember(run.run_id, watchOf(run));
  }

  /** The run's worker reported streamed text or a log line: its window's delivery is queued, once. */
  reported(runId: string, event: StreamEvent): void {
    const known = this.watched.get(runId);
    if (known === undefined) {
      const reading = this.opts.runs.get(runId).then(
        (run) => (run && !isTerminal(run.status) ? watchOf(run) : null),
        () => null,
      );
      this.remember(runId, reading);
      void reading.then((w) => {
        if (this.watched.get(runId) === reading) this.remember(runId, w);
        this.schedule(runId, event, w);
      });
      return;
    }
    if (known instanceof Promise) return; // its read schedules the window
    this.schedule(runId, event, known);
  }

  private remember(runId: string, watch: Watch | Promise<Watch>): void {
    this.watched.delete(runId);
    this.watched.set(runId, watch);
    if (this.watched.size > MAX_WATCHED) this.watched.delete(this.watched.keys().next().value!);
  }

  private schedule(runId: string, event: StreamEvent, watch: Watch): void {
    if (!watch?.events.has(event)) return;
    const now = Date.now();
    const index = Math.floor(now / this.windowMs);
    const key = `${runId}\n${event}`;
    if (this.windows.get(key) === index) return;
    this.windows.delete(key);
    this.windows.set(key, index);
    // Runs that end on another instance are never forgotten here by their status: bounded like `watched`.
    if (this.windows.size > MAX_WATCHED) this.windows.delete(this.windows.keys().next().value!);
    const data: WebhookJobData = { run_id: runId, account_id: watch.accountId, event, url: watch.url, webhook_id: `msg_${runId}_${event}_${index}` };
    this.opts.queue.add(data, { index, delayMs: (index + 1) * this.windowMs - now }).catch((err: unknown) => this.opts.log.error({ err, runId, event }, 'could not queue a webhook delivery'));
  }

  /**
   * The body of an `output` or `logs` delivery, built at its first attempt: the job now and what
   * the run logged of the event since its last delivery; null when an earlier delivery carried it
   * all already (nothing is sent).
   */
  async build(d: WebhookJobData): Promise<WebhookPayload | null> {
    const event = d.event as StreamEvent;
    const { from, events } = await this.opts.eventLog.claim(d.run_id, event, MAX_EVENTS);
    const mine = events.filter((e) => e.event === LOG_EVENT[event]);
    // A full batch: the rest goes in the next window's delivery.
    if (events.length === MAX_EVENTS) this.windows.delete(`${d.run_id}\n${event}`);
    if (mine.length === 0) return null;
    const run = await this.opts.runs.get(d.run_id);
    if (!run) return null;
    const parsed = mine.map((e) => JSON.parse(e.data) as Record<string, unknown>);
    const delta =
      event === 'output'
        ? { after_event: from, first_event: mine[0].id, last_event: mine.at(-1)!.id, text: parsed.map((p) => String(p.delta ?? '')).join('') }
        : { after_event: from, first_event: mine[0].id, last_event: mine.at(-1)!.id, lines: parsed };
    return { type: TYPES[event], timestamp: new Date().toISOString(), data: jobView(run), delta };
  }
}

function watchOf(run: RunRecord): Watch {
  if (!run.webhook) return null;
  const events = new Set(run.webhook_events_filter.filter((e): e is StreamEvent => e === 'output' || e === 'logs'));
  return events.size ? { url: run.webhook, accountId: run.account_id, events } : null;
}
