import type { BatchRecord } from '../../../models/batch-types.js';
import type { RunEventLog } from '../../../models/run-event-log.js';
import type { RunStore } from '../../../models/stores.js';
import { isTerminal, type RunRecord } from '../../../models/types.js';
import { batchView } from '../../contract/batch-view.js';
import { jobView } from '../../contract/presenters.js';
import { summarize } from '../jobs/batch-service.js';
import { LiveEvent } from './live-event.js';
import type { RunEventHub } from './run-event-hub.js';
import type { RunEventSink } from './run-follower.js';

export interface BatchFollowerOptions {
  hub: RunEventHub;
  /** The run event log, which also holds each batch's log under its batch id (BatchEventWriter). */
  log: RunEventLog;
  runs: Pick<RunStore, 'get' | 'batchMembers'>;
  /** How often a stream re-reads its runs, should a status event have been lost (a gateway that died mid-change). */
  recheckMs: number;
}

/** Events replayed from the log per read. */
const PAGE = 1000;
/** Live events held while the start is read; past this the client is cut off and resumes. */
const MAX_HELD = 20_000;

/**
 * Follows every run of a batch over ONE subscription, the batch's own channel (BatchEventWriter),
 * for one client. A fresh follower gets each run's current job as `status` (all numbered with
 * the log's last event), then each status change as it happens; a resumed one (`after` =
 * Last-Event-ID) gets the batch log's events after it, then live ones. Once every run has ended
 * it sends `done` with the batch (batchView) and ends.
 */
export class BatchFollower {
  constructor(private readonly opts: BatchFollowerOptions) {}

  async follow(batch: BatchRecord, after: number | null, sink: RunEventSink): Promise<() => void> {
    const id = batch.batch_id;
    let lastSent = after ?? -1;
    let live = false;
    let ended = false;
    let closing = false;
    const open = new Set<string>();
    const buffered: LiveEvent[] = [];
    const done = () => {
      if (closing) return;
      closing = true;
      summarize(batch, this.opts.runs)
        .then((summary) => !ended && sink.send(LiveEvent.of(lastSent + 1, 'done', batchView(summary))))
        .catch(() => {})
        .finally(finish);
    };
    const pass = (e: LiveEvent, numbered = true) => {
      if (ended || closing || (numbered && e.id <= lastSent)) return;
      lastSent = Math.max(lastSent, e.id);
      sink.send(e);
      const job = JSON.parse(e.data) as { run_id?: string; terminal?: boolean };
      if (job.terminal && job.run_id && open.delete(job.run_id) && open.size === 0) done();
    };
    const unsubscribe = await this.opts.hub.subscribe(id, (e) => (live ? pass(e) : buffered.push(e) > MAX_HELD && finish()));
    const timer = setInterval(() => {
      this.opts.runs
        .batchMembers(batch)
        .then((members) => members.every((m) => isTerminal(m.status)) && done())
        .catch(() => {});
    }, this.opts.recheckMs);
    timer.unref();
    const finish = () => {
      if (ended) return;
      ended = true;
      clearInterval(timer);
      unsubscribe();
      sink.end();
    };
    try {
      const top = (await this.opts.log.last(id))?.id ?? 0;
      if (after !== null && after > top) after = null;
      if (after === null) {
        const runs = (await Promise.all(batch.run_ids.map((r) => this.opts.runs.get(r)))).filter((r): r is RunRecord => r !== null);
        for (const run of runs) if (!isTerminal(run.status)) open.add(run.run_id);
        for (const run of runs) pass(LiveEvent.of(top, 'status', jobView(run)), false);
        lastSent = top;
      } else {
        lastSent = after;
        for (const m of await this.opts.runs.batchMembers(batch)) if (!isTerminal(m.status)) open.add(m.run_id);
        for (let cursor = after; ; ) {
          const page = await this.opts.log.after(id, cursor, PAGE);
          for (const e of page) pass(new LiveEvent(e.id, e.event, e.data));
          if (page.length < PAGE || ended) break;
          cursor = page[page.length - 1].id;
          await sink.drained?.();
        }
      }
    } catch (err) {
      finish();
      throw err;
    }
    if (open.size === 0) done();
    for (const e of buffered) pass(e);
    buffered.length = 0;
    live = true;
    return finish;
  }
}
