import { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import type { RunRecord } from '../models/types.js';
import { KINDS, TIERS, type Tier } from '../models/kinds.js';
import { queueName } from './queue-names.js';

/** What a queued BullMQ job carries. The run record is the source of truth; this is a pointer to it. */
export interface QueuedJobData {
  run_id: string;
  account_id: string;
  kind: string;
  tier: Tier;
}

export interface JobQueuesOptions {
  /** A non-blocking ioredis client, shared by every producer queue. */
  connection: Redis;
  /** BullMQ key prefix. */
  prefix: string;
  /** Finished BullMQ jobs kept for Bull Board (run records keep the real history). */
  keepCompleted?: { age: number; count: number };
  keepFailed?: { age: number; count: number };
}

/**
 * The producer side of the queues: one BullMQ queue per kind x tier, all sharing one
 * connection. The job id is the run id, so adding a run twice adds it once.
 */
export class JobQueues {
  private readonly queues = new Map<string, Queue<QueuedJobData>>();

  constructor(private readonly opts: JobQueuesOptions) {
    for (const { kind } of KINDS) for (const tier of TIERS) this.queue(kind, tier);
  }

  queue(kind: string, tier: Tier): Queue<QueuedJobData> {
    const name = queueName(kind, tier);
    let queue = this.queues.get(name);
    if (!queue) {
      queue = new Queue<QueuedJobData>(name, {
        connection: this.opts.connection,
        prefix: this.opts.prefix,
        defaultJobOptions: {
          // Dispatch decides when a run has had its last attempt (JOB_MAX_ATTEMPTS, counted in
          // leases, stalls included) and then fails the job as unrecoverable; BullMQ's own
          // count must never end a job behind the run record's back.
          attempts: 1_000_000,
          removeOnComplete: this.opts.keepCompleted ?? { age: 24 * 3600, count: 1000 },
          removeOnFail: this.opts.keepFailed ?? { age: 7 * 24 * 3600, count: 5000 },
        },
      });
      // BullMQ re-emits connection errors here and prints them raw to stderr when nobody
      // listens; an outage already shows as failed commands (503s) and on /readyz.
      queue.on('error', () => {});
      this.queues.set(name, queue);
    }
    return queue;
  }

  all(): Queue<QueuedJobData>[] {
    return [...this.queues.values()];
  }

  async add(run: Pick<RunRecord, 'run_id' | 'account_id' | 'kind' | 'confidentiality' | 'priority'>): Promise<void> {
    const data: QueuedJobData = { run_id: run.run_id, account_id: run.account_id, kind: run.kind, tier: run.confidentiality };
    await this.queue(run.kind, run.confidentiality).add(run.kind, data, { jobId: run.run_id, priority: run.priority });
  }


  /**
   * 1-based place of a waiting run in its queue (waiting jobs without priority, then by
   * priority and arrival): two O(log n) reads, no scan. Null when the job is not waiting.
   */
  async position(run: Pick<RunRecord, 'run_id' | 'kind' | 'confidentiality'>): Promise<number | null> {
    const queue = this.queue(run.kind, run.confidentiality);
    const [[, waiting], [, rank]] = (await this.opts.connection
      .pipeline()
      .llen(queue.keys.wait)
      .zrank(queue.keys.prioritized, run.run_id)
      .exec()) as [[null, number], [null, number | null]];
    return rank === null ? null : waiting + rank + 1;
  }

  /** Removes a waiting job; a job under lease stays (its worker is told to stop instead). */
  async remove(run: Pick<RunRecord, 'run_id' | 'kind' | 'confidentiality'>): Promise<boolean> {
    return (await this.queue(run.kind, run.confidentiality).remove(run.run_id)) === 1;
  }

  async close(): Promise<void> {
    await Promise.all(this.all().map((q) => q.close()));
  }
}
