import type { JobQueues } from '../../../queues/job-queues.js';
import type { Tier } from '../../../models/kinds.js';
import { parseQueueName } from '../../../queues/queue-names.js';

export interface QueueDepthRow {
  kind: string;
  tier: Tier;
  /** Null for a kind's default queue (jobs naming no model). */
  model: string | null;
  waiting: number;
  prioritized: number;
  delayed: number;
  active: number;
}

export interface QueueDepthOptions {
  queues: JobQueues;
  /** Scrapes within this long share one read. @defaultValue 1000 */
  cacheMs?: number;
  /** A read slower than this is given up (the scrape answers without queue depths). @defaultValue 2000 */
  timeoutMs?: number;
}

/**
 * How many jobs wait and run in every queue (kind x tier, and kind x tier x model), fleet-wide:
 * read from Redis at scrape time, as the queues hold them. The counts of all queues are asked at
 * once on the shared auto-pipelining connection, so a read is two round trips (the set of model
 * queues, then the counts) whatever the number of queues; several Prometheus servers scraping
 * several instances share a read per second per instance (as FleetService does).
 */
export class QueueDepth {
  private cached?: { at: number; value: Promise<QueueDepthRow[]> };

  constructor(private readonly opts: QueueDepthOptions) {}

  read(): Promise<QueueDepthRow[]> {
    const now = Date.now();
    if (!this.cached || now - this.cached.at > (this.opts.cacheMs ?? 1000)) {
      const value = this.withDeadline(this.count());
      this.cached = { at: now, value };
      // A failed read is not remembered: the next scrape tries again.
      value.catch(() => {
        if (this.cached?.value === value) this.cached = undefined;
      });
    }
    return this.cached.value;
  }

  /** One row per kind, tier and model: a queue split in partitions (QUEUE_PARTITIONS) is counted as the sum of them. */
  private async count(): Promise<QueueDepthRow[]> {
    const rows = new Map<string, QueueDepthRow>();
    await Promise.all(
      (await this.opts.queues.known()).map(async (queue) => {
        const at = parseQueueName(queue.name);
        if (!at) return;
        const c = await queue.getJobCounts('wait', 'prioritized', 'delayed', 'active');
        const key = `${at.kind}|${at.tier}|${at.model ?? ''}`;
        const row = rows.get(key) ?? { ...at, waiting: 0, prioritized: 0, delayed: 0, active: 0 };
        row.waiting += c.wait ?? 0;
        row.prioritized += c.prioritized ?? 0;
        row.delayed += c.delayed ?? 0;
        row.active += c.active ?? 0;
        rows.set(key, row);
      }),
    );
    return [...rows.values()];
  }

  /** A scrape must not hang on a Redis that does not answer (ioredis retries for a long while). */
  private withDeadline<T>(work: Promise<T>): Promise<T> {
    const ms = this.opts.timeoutMs ?? 2000;
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`queue counts took longer than ${ms} ms`)), ms);
      timer.unref();
    });
    return Promise.race([work, deadline]).finally(() => clearTimeout(timer));
  }
}
