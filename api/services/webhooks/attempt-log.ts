import type { RedisClient } from '../../../models/redis-connection.js';
import type { RedisKeys } from '../../../models/redis/keys.js';
// A wire shape the client library reads too, so it is defined once, with the client's types:
// sdk/client may import only itself and sdk/attestation (test/client-library.test.ts).
import type { WebhookAttempt } from '../../../sdk/client/types.js';

/** Keeps the newest attempts only; a run sends at most two events of seven attempts each by default. */
const MAX_ATTEMPTS_KEPT = 100;

/**
 * A run's webhook attempts: a capped Redis list per run (with either store: attempts are queue
 * state, like the deliveries), expiring with the run's retention.
 */
export class WebhookAttemptLog {
  constructor(private readonly opts: { redis: RedisClient; keys: RedisKeys; ttlSeconds: number }) {}

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
