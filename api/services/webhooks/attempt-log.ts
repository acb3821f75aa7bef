import type { Redis } from 'ioredis';
import type { RedisKeys } from '../../../models/redis/keys.js';
import type { WebhookEvent } from '../../../models/types.js';

/**
 * What became of one attempt: `delivered` (2xx), `retrying` (failed, another attempt is
 * scheduled at `next_attempt_at`), `gave_up` (failed, and it was the last attempt), `failed`
 * (the receiver answered 410 Gone: no more attempts).
 */
export type WebhookOutcome = 'delivered' | 'failed' | 'retrying' | 'gave_up';

/** One delivery attempt as `GET /v1/jobs/{run_id}/webhooks` shows it. */
export interface WebhookAttempt {
  webhook_id: string;
  event: WebhookEvent;
  url: string;
  /** 1-based, per event. */
  attempt: number;
  /** When the attempt started. */
  at: string;
  /** The receiver's HTTP status; null when it never answered. */
  status_code: number | null;
  /** Why no answer came (`timeout`, `connect_failed`, `tls_failed`, `url_blocked`, ...); null when one did. */
  error: string | null;
  duration_ms: number;
  outcome: WebhookOutcome;
  next_attempt_at: string | null;
}

/** Keeps the newest attempts only; a run sends at most two events of seven attempts each by default. */
const MAX_ATTEMPTS_KEPT = 100;

/**
 * A run's webhook attempts: a capped Redis list per run (with either store: attempts are queue
 * state, like the deliveries), expiring with the run's retention.
 */
export class WebhookAttemptLog {
  constructor(private readonly opts: { redis: Redis; keys: RedisKeys; ttlSeconds: number }) {}

  async record(runId: string, attempt: WebhookAttempt): Promise<void> {
    const key = this.opts.keys.webhookAttempts(runId);
    await this.opts.redis
      .multi()
      .rpush(key, JSON.stringify(attempt))
      .ltrim(key, -MAX_ATTEMPTS_KEPT, -1)
      .expire(key, this.opts.ttlSeconds)
      .exec();
  }

  /** Oldest first. */
  async list(runId: string): Promise<WebhookAttempt[]> {
    return (await this.opts.redis.lrange(this.opts.keys.webhookAttempts(runId), 0, -1)).map((line) => JSON.parse(line) as WebhookAttempt);
  }
}
