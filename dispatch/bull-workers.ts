import { createRedisBackend, Job, Worker } from 'bullmq';
import type { RedisClient } from '../models/redis-connection.js';
import type { Logger } from 'pino';
import { redisScripts } from '../models/redis/redis-scripts.js';
import type { QueuedJobData } from '../queues/job-queues.js';

export interface BullWorkersOptions {
  /** Connection for BullMQ workers (maxRetriesPerRequest: null), shared by all of them: nothing here blocks. */
  connection: RedisClient;
  /**
   * An auto-pipelined connection with no scripts defined on it, for the look at which queues
   * hold jobs: a pipeline built on `connection` copies BullMQ's ~50 scripts into itself.
   */
  reads: RedisClient;
  /** Each queue's BullMQ key prefix (`RedisKeys.queuePrefixOf`). */
  prefixOf: (queue: string) => string;
  /** Lock duration of a lease; extended by heartbeats. */
  lockMs: number;
  log: Logger;
}

/**
 * Jobs are fetched with `block: false` only, so BullMQ's Workers need no blocking connection:
 * each shares the one it is given, and a thousand model queues cost no connection more.
 */
const sharedBackend: typeof createRedisBackend = (name, opts) => createRedisBackend(name, opts, { blocking: false });

/**
 * BullMQ's consumer side with manual fetching: one `Worker` per queue this gateway has a
 * capable worker for (created on first use, never per remote worker), no processor, no
 * main loop. Lock tokens are minted by the gateway. The stalled checker runs here and moves
 * jobs whose lock lapsed (their gateway died) back to their queue; the stall limit is
 * enforced by the dispatcher through the attempt count, so BullMQ's own is set out of reach.
 */
export class BullWorkers {
  private readonly workers = new Map<string, Worker<QueuedJobData>>();
  private closed = false;

  constructor(private readonly opts: BullWorkersOptions) {}

  private worker(queue: string): Worker<QueuedJobData> {
    let w = this.workers.get(queue);
    if (!w) {
      w = new Worker<QueuedJobData>(queue, null, {
        connection: this.opts.connection,
        prefix: this.opts.prefixOf(queue),
        autorun: false,
        lockDuration: this.opts.lockMs,
        stalledInterval: Math.max(1000, Math.floor(this.opts.lockMs / 2)),
        maxStalledCount: 1_000_000,
      }, sharedBackend);
      w.on('error', (err) => this.opts.log.warn({ err, queue }, 'BullMQ worker error'));
      void w.startStalledCheckTimer().catch((err) => this.opts.log.warn({ err, queue }, 'stalled checker failed to start'));
      this.workers.set(queue, w);
    }
    return w;
  }

  /** Moves the next waiting job of `queue` to active under `token`, without blocking. */
  async fetch(queue: string, token: string): Promise<Job<QueuedJobData> | undefined> {
    // A fill still running when the dispatcher stops must not open new connections.
    if (this.closed) return undefined;
    return (await this.worker(queue).getNextJob(token, { block: false })) ?? undefined;
  }

  /**
   * Which of these queues hold waiting jobs, in one round trip (three cheap reads per queue), so a
   * worker serving many models does not run a fetch script on each empty queue.
   */
  async holding(queues: string[]): Promise<boolean[]> {
    return (await this.heads(queues)).map((h) => h.urgency !== EMPTY);
  }

  /**
   * How urgent the job a fetch of each queue would take is, in one round trip (three cheap reads
   * per queue), as BullMQ orders them: 0 for a job in the wait list (no priority, or handed
   * back), else its priority (1 most urgent), a due delayed retry after those, `EMPTY` for none;
   * and a prioritized head's id (a run id: its ULID sorts by creation). What picks, among a split
   * queue's partitions, the one to fetch from (`moreUrgent`).
   */
  async heads(queues: string[]): Promise<QueueHead[]> {
    if (this.closed) return queues.map(() => ({ urgency: EMPTY }));
    const keys = queues.map((q) => this.worker(q).keys);
    const { reads } = this.opts;
    const due = (Date.now() + 1) * 0x1000 - 1;
    const read = await Promise.all(keys.flatMap((k) => [reads.llen(k.wait), reads.zrange(k.prioritized, '0', '0', 'WITHSCORES'), reads.zcount(k.delayed, 0, due)]));
    return queues.map((_, i) => {
      if ((read[3 * i] as number) > 0) return { urgency: 0 };
      const head = read[3 * i + 1] as string[];
      // BullMQ scores a prioritized job priority * 2^32 + a counter (its getPriorityScore.lua).
      if (head.length === 2) return { urgency: Math.floor(Number(head[1]) / 0x100000000), id: head[0] };
      return { urgency: (read[3 * i + 2] as number) > 0 ? DELAYED_DUE : EMPTY };
    });
  }

  /** How many jobs each queue holds that a fetch could take now (waiting, prioritized, due delayed): three O(1)/O(log n) reads per queue in one round trip. */
  async waiting(queues: string[]): Promise<number[]> {
    if (this.closed) return queues.map(() => 0);
    // Made here, not at a first fetch: a queue's stalled checker runs from its Worker, and a
    // queue that looks empty may hold a lapsed lease only that checker brings back.
    const keys = queues.map((q) => this.worker(q).keys);
    const { reads } = this.opts;
    // Commands of one turn on an auto-pipelined connection go out as one write: one round trip.
    // A delayed retry that is due counts too: the fetch promotes it. Its score is BullMQ's
    // (timestamp * 0x1000 + a counter), the bound its promoteDelayedJobs.lua uses.
    const due = (Date.now() + 1) * 0x1000 - 1;
    const counts = await Promise.all(keys.flatMap((k) => [reads.llen(k.wait), reads.zcard(k.prioritized), reads.zcount(k.delayed, 0, due)]));
    return queues.map((_, i) => counts[3 * i] + counts[3 * i + 1] + counts[3 * i + 2]);
  }

  /** A job of `queue` read back by id, bound to this process's worker so it can be completed here. */
  async job(queue: string, jobId: string): Promise<Job<QueuedJobData> | undefined> {
    if (this.closed) return undefined;
    return Job.fromId<QueuedJobData>(this.worker(queue), jobId);
  }

  /** Extends the locks of leases held under these tokens; returns the job ids whose lock is gone. */
  async extend(queue: string, jobIds: string[], tokens: string[]): Promise<string[]> {
    if (jobIds.length === 0) return [];
    return this.worker(queue).extendJobLocks(jobIds, tokens, this.opts.lockMs);
  }

  /**
   * Puts a job fetched under `token` back at the head of its wait list as if never fetched:
   * its started-attempts count is taken back (only while `token` still holds its lock), so a
   * hand-over that failed on the gateway's side costs the run no attempt. On this connection
   * commands wait out a Redis outage, so this completes once Redis answers again.
   */
  async handBack(queue: string, job: Job<QueuedJobData>, token: string): Promise<void> {
    await redisScripts.run(this.opts.connection, 'uncountAttempt', [this.worker(queue).toKey(job.id!)], [token]);
    try {
      await job.moveToWait(token);
    } catch (err) {
      // Its lock lapsed meanwhile: the stalled checker has moved it back already.
      if (!isLockLost(err)) throw err;
    }
  }

  /**
   * Parks a job fetched under `token` (dispatch/concurrency-gate.ts): out of the wait list into
   * the delayed set until `until` (unless put back before), its started attempt taken back.
   */
  async park(queue: string, job: Job<QueuedJobData>, token: string, until: number): Promise<void> {
    await redisScripts.run(this.opts.connection, 'uncountAttempt', [this.worker(queue).toKey(job.id!)], [token]);
    try {
      await job.moveToDelayed(until, token);
    } catch (err) {
      if (!isLockLost(err)) throw err;
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    // A worker created moments ago may still be opening its blocking connection; closing it
    // before that finishes would leave the connection open behind our back.
    await Promise.all(
      [...this.workers.values()].map(async (w) => {
        await w.waitUntilReady().catch(() => {});
        await w.close(true).catch(() => {});
      }),
    );
    this.workers.clear();
  }
}

/** The job a fetch of a queue would take next, as `BullWorkers.heads` reads it. */
export interface QueueHead {
  urgency: number;
  /** A prioritized head's job id. */
  id?: string;
}

/** `BullWorkers.heads` of a queue with no job a fetch could take now. */
export const EMPTY = Number.POSITIVE_INFINITY;

/**
 * Whether head `a` is served before `b` as one queue would serve them: more urgent first, and at
 * equal priority the older run (run ids are ULIDs; BullMQ's own counters are per queue).
 */
export const moreUrgent = (a: QueueHead, b: QueueHead): boolean => a.urgency < b.urgency || (a.urgency === b.urgency && a.id !== undefined && b.id !== undefined && a.id < b.id);
/** `BullWorkers.heads` of a queue whose only takeable job is a due delayed retry: after any prioritized job (BullMQ's priorities stop at 2^21 - 1). */
const DELAYED_DUE = 2 ** 21;

/** True when BullMQ refused an operation because the lease's lock is gone or owned by another lease. */
export function isLockLost(err: unknown): boolean {
  return err instanceof Error && /Missing lock|Lock mismatch|Missing key for job|not in the active state/i.test(err.message);
}
