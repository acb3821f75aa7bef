import { Queue, Worker, type Job } from 'bullmq';
import type { RedisClient } from '../models/redis-connection.js';
import type { Logger } from 'pino';
import type { WebhookEvent } from '../models/types.js';

export const WEBHOOK_QUEUE = 'webhooks';

/**
 * Finished deliveries are kept this long, so that a second enqueue of the same run and event
 * (a run started again after a lost lease, a replayed status change) finds the job id and is
 * a no-op. Longer than the whole retry schedule.
 */
const KEEP_FINISHED_S = 48 * 3600;

/** One delivery: everything needed to send it, so every attempt sends the same body. */
export interface WebhookJobData {
  run_id: string;
  account_id: string;
  event: WebhookEvent;
  url: string;
  /** The Standard Webhooks message id, the same on every attempt (receivers dedupe on it). */
  webhook_id: string;
  /**
   * The body, snapshotted when the moment happened: the job object then, never artifact bytes.
   * Absent for an `output` or `logs` delivery until its first attempt builds it from what the
   * run logged since the last one (then kept, so every attempt sends the same body).
   */
  payload?: WebhookPayload;
}

export interface WebhookPayload {
  type: string;
  timestamp: string;
  data: Record<string, unknown>;
  /** `output` and `logs`: what the run logged since the event's last delivery. */
  delta?: Record<string, unknown>;
}

export interface WebhookQueueOptions {
  /** Non-blocking producer connection (shared). */
  connection: RedisClient;
  /** Each queue's BullMQ key prefix, as the job queues'. */
  prefixOf: (queue: string) => string;
  /** Delay before each retry; as many retries as entries. */
  retryDelaysMs: number[];
}

/**
 * The `webhooks` BullMQ queue and, in every gateway process, a worker that delivers from it.
 * Retries follow `retryDelaysMs` (a custom backoff), so attempts = retries + 1.
 */
export class WebhookQueue {
  readonly queue: Queue<WebhookJobData>;
  private worker?: Worker<WebhookJobData>;

  constructor(private readonly opts: WebhookQueueOptions) {
    this.queue = new Queue<WebhookJobData>(WEBHOOK_QUEUE, {
      connection: opts.connection,
      prefix: opts.prefixOf(WEBHOOK_QUEUE),
      defaultJobOptions: {
        attempts: opts.retryDelaysMs.length + 1,
        backoff: { type: 'webhook' },
        removeOnComplete: { age: KEEP_FINISHED_S },
        removeOnFail: { age: KEEP_FINISHED_S },
      },
    });
    // Connection errors surface on the commands that fail; unheard, BullMQ prints them raw.
    this.queue.on('error', () => {});
  }

  /**
   * Queues a delivery once per run and event: the job id names both (BullMQ ids cannot hold ':');
   * `window` (output and logs) makes it once per run, event and window, sent at `delayMs`.
   */
  async add(data: WebhookJobData, window?: { index: number; delayMs: number }): Promise<void> {
    const jobId = window ? `${data.run_id}-${data.event}-${window.index}` : `${data.run_id}-${data.event}`;
    await this.queue.add(data.event, data, { jobId, ...(window ? { delay: Math.max(0, window.delayMs) } : {}) });
  }

  /** Delay before the attempt that follows failed attempt `attempt` (1-based). */
  retryDelayMs(attempt: number): number {
    const delays = this.opts.retryDelaysMs;
    return delays[Math.min(attempt, delays.length) - 1] ?? 0;
  }

  /**
   * Starts delivering in this process. `deliver` throws to fail the attempt: it is retried
   * while attempts remain, unless it threw BullMQ's `UnrecoverableError`.
   */
  work(opts: { connection: RedisClient; concurrency: number; log: Logger; deliver: (job: Job<WebhookJobData>) => Promise<void> }): void {
    this.worker = new Worker<WebhookJobData>(WEBHOOK_QUEUE, opts.deliver, {
      connection: opts.connection,
      prefix: this.opts.prefixOf(WEBHOOK_QUEUE),
      concurrency: opts.concurrency,
      settings: { backoffStrategy: (attemptsMade: number) => this.retryDelayMs(attemptsMade) },
    });
    this.worker.on('error', (err) => opts.log.warn({ err }, 'webhook worker error'));
  }

  /** Stops taking deliveries (those under way finish first), then closes the queue. */
  async close(): Promise<void> {
    await this.worker?.close();
    await this.queue.close();
  }
}
