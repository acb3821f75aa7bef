import type { LoggedRunEvent, RunEventLog } from '../../../models/run-event-log.js';

type LoggedPage = LoggedRunEvent[];
import type { RunStore } from '../../../models/stores.js';
import { isTerminal, type RunRecord } from '../../../models/types.js';
import { jobView } from '../../contract/presenters.js';
import type { QueueState } from '../jobs/job-service.js';
import { LiveEvent } from './live-event.js';
import type { RunEventHub } from './run-event-hub.js';

/** Where a follower's events go: an SSE response, a WebSocket subscription. */
export interface RunEventSink {
  send(event: LiveEvent): void;
  /** The run is done (after its `done` event) or the follow was stopped. */
  end(): void;
  /** While the backlog is replayed: a promise when the client should catch up first. */
  drained?(): Promise<void> | undefined;
}

export interface RunFollowerOptions {
  hub: RunEventHub;
  log: RunEventLog;
  runs: RunStore;
  /** Queue position and waiting reason for the first `status` of a fresh connection. */
  queueState: (run: RunRecord) => Promise<QueueState | null>;
}

/** Events replayed from the log per read. */
const PAGE = 1000;
/** Live events held while a backlog is replayed; past this the client is cut off and resumes. */
const MAX_HELD = 10_000;

/**
 * Follows one run for one client, docs/api.md "Events": a fresh follower gets the current job
 * as `status`, then live events; a resumed one (`after` = Last-Event-ID) gets every logged
 * event after it, then live ones. The live subscription starts before the log is read and
 * events are passed on only above the last number sent, so the replay/live boundary has
 * neither a gap nor a duplicate. Ends after `done`.
 */
export class RunFollower {
  constructor(private readonly opts: RunFollowerOptions) {}

  /** Starts following; resolves with the function that stops it early (client gone). */
  async follow(run: RunRecord, after: number | null, sink: RunEventSink): Promise<() => void> {
    let lastSent = after ?? -1;
    let live = false;
    let ended = false;
    const buffered: LiveEvent[] = [];
    const pass = (e: LiveEvent) => {
      if (ended || e.id <= lastSent) return;
      lastSent = e.id;
      sink.send(e);
      if (e.terminal) finish();
    };
    const hold = (e: LiveEvent) => {
      if (buffered.push(e) > MAX_HELD) finish();
    };
    const unsubscribe = await this.opts.hub.subscribe(run.run_id, (e) => (live ? pass(e) : hold(e)));
    const finish = () => {
      if (ended) return;
      ended = true;
      unsubscribe();
      sink.end();
    };
    try {
      // An id beyond the log's end (a made-up Last-Event-ID, or a log that expired and started
      // again) would hide every later event, `done` included: start such a client afresh.
      // (Numbers start at 1, so `after` 0 cannot be past the end: no read for it.)
      if (after !== null && after > 0 && after > ((await this.opts.log.last(run.run_id))?.id ?? 0)) {
        after = null;
        lastSent = -1;
      }
      if (after === null) await this.snapshot(run.run_id, pass);
      else await this.replay(run.run_id, after, pass, sink, () => ended);
    } catch (err) {
      finish();
      throw err;
    }
    if (ended) return finish;
    // What it read of the log, for the hub to tell a lost first live message by its number.
    if (lastSent > 0) this.opts.hub.seen(run.run_id, lastSent);
    for (const e of buffered) pass(e);
    buffered.length = 0;
    live = true;
    return finish;
  }

  /** Fresh connection: the job as it is now, numbered with the log's last event. */
  private async snapshot(runId: string, pass: (e: LiveEvent) => void): Promise<void> {
    const last = await this.opts.log.last(runId);
    const run = await this.current(runId);
    const top = last?.id ?? 0;
    const job = jobView(run, await this.opts.queueState(run));
    if (!isTerminal(run.status)) {
      pass(LiveEvent.of(top, 'status', job));
      return;
    }
    // Already over: `status`, `done`, close. Numbered to line up with the logged pair when
    // it is there; past the log's end when the log has lost it. The log is read again: the run
    // may have ended between the read above and the record's, its terminal status and `done`
    // logged in the step that ended it, which numbered from the older top would give a `done`
    // short of the logged one (test/events-sse.test.ts's eventsource test caught it on a loaded machine).
    const final = await this.opts.log.last(runId);
    const base = final?.event === 'done' ? final.id - 1 : Math.max(top, final?.id ?? 0);
    pass(LiveEvent.of(base, 'status', job));
    pass(LiveEvent.of(base + 1, 'done', job));
  }

  /** Resumed connection: every logged event after `after`, ending with `done` if the run has ended. */
  private async replay(runId: string, after: number, pass: (e: LiveEvent) => void, sink: RunEventSink, ended: () => boolean): Promise<void> {
    let cursor = after;
    let first = true;
    /** Highest id passed on from the log; `done` passed returns at once. */
    let read = after;
    const passAll = async (page: LoggedPage): Promise<boolean> => {
      for (const e of page) {
        if (ended()) return true;
        pass(new LiveEvent(e.id, e.event, e.data));
        read = e.id;
        if (e.event === 'done') return true;
        await sink.drained?.();
      }
      return false;
    };
    for (;;) {
      const page = await this.opts.log.after(runId, cursor, PAGE);
      if (first && page.length && page[0].id > after + 1) {
        // The log was trimmed past what this client saw: start it again from the current state.
        const run = await this.current(runId);
        if (!isTerminal(run.status)) pass(LiveEvent.of(page[0].id - 1, 'status', jobView(run, await this.opts.queueState(run))));
      }
      first = false;
      if (await passAll(page)) return;
      if (page.length < PAGE) break;
      cursor = page[page.length - 1].id;
    }
    const run = await this.current(runId);
    if (!isTerminal(run.status)) return;
    // The run may have ended between the log read above and this record read: its terminal
    // `status` and `done` are in the log by now (the status in the same step as the change).
    // Without this read they were made up past the log's end and the logged ones, held as
    // live events meanwhile, were dropped as older: a gap (found by npm run chaos, redis-kill).
    if (await passAll(await this.opts.log.after(runId, read, PAGE))) return;
    const job = jobView(run);
    const last = await this.opts.log.last(runId);
    // Its status logged, its `done` not yet: that comes live, numbered next.
    if (last && last.id === read && read > after && last.event === 'status' && (JSON.parse(last.data) as { terminal?: boolean }).terminal) {
      pass(LiveEvent.of(read + 1, 'done', job));
      return;
    }
    // Ended without a logged `done` (the log expired, or the process that ended it died
    // before logging): the record is the truth.
    const base = Math.max(read, last?.id ?? 0);
    pass(LiveEvent.of(base + 1, 'status', job));
    pass(LiveEvent.of(base + 2, 'done', job));
  }

  private async current(runId: string): Promise<RunRecord> {
    const run = await this.opts.runs.get(runId);
    if (!run) throw new Error(`run ${runId} vanished while being followed`);
    return run;
  }

  /**
   * Resolves with the run once it is terminal, or null after `ms` (or when `signal` aborts).
   * Used by `Prefer: wait`: one subscription, no polling.
   */
  async waitForTerminal(runId: string, ms: number, signal?: AbortSignal): Promise<RunRecord | null> {
    let wake!: () => void;
    const woken = new Promise<void>((resolve) => (wake = resolve));
    const unsubscribe = await this.opts.hub.subscribe(runId, (e) => e.terminal && wake());
    const timer = setTimeout(wake, ms);
    signal?.addEventListener('abort', wake, { once: true });
    // Aborted while subscribing (a shutdown, a caller gone): no event would come.
    if (signal?.aborted) wake();
    try {
      // Read after subscribing: a run that ended in between is seen here, not missed.
      const run = await this.opts.runs.get(runId);
      if (!run || isTerminal(run.status)) return run;
      await woken;
      const after = await this.opts.runs.get(runId);
      return after && isTerminal(after.status) ? after : null;
    } finally {
      clearTimeout(timer);
      signal?.removeEventListener('abort', wake);
      unsubscribe();
    }
  }
}
