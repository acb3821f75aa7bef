import type { JobQueues } from '../../../queues/job-queues.js';
import { KINDS, TIERS, type Tier } from '../../../models/kinds.js';

export interface QueueDepthRow {
  kind: string;
  tier: Tier;
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
 * How many jobs wait and run in every queue (kind x tier), fleet-wide: read from Redis at
 * scrape time, as the queues hold them. The counts of all 33 queues are asked at once on the
 * shared auto-pipelining connection, so a read is one round trip; several Prometheus servers
 * scraping several instances share a read per second per instance (as FleetService does).
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

  private count(): Promise<QueueDepthRow[]> {
    return Promise.all(
      KINDS.flatMap(({ kind }) =>
        TIERS.map(async (tier) => {
          const c = await this.opts.queues.queue(kind, tier).getJobCounts('wait', 'prioritized', 'delayed', 'active');
          return { kind, tier, waiting: c.wait ?? 0, prioritized: c.prioritized ?? 0, delayed: c.delayed ?? 0, active: c.active ?? 0 };
        }),
      ),
    );
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
