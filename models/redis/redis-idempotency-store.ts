import type { RedisClient } from '../redis-connection.js';
import type { IdempotencyClaim, IdempotencyStore } from '../stores.js';
import type { RedisKeys } from './keys.js';
import { redisScripts } from './redis-scripts.js';

export class RedisIdempotencyStore implements IdempotencyStore {
  constructor(private readonly redis: RedisClient, private readonly keys: RedisKeys) {}

  async claim(accountId: string, key: string, fingerprint: string, runId: string, ttlMs: number): Promise<IdempotencyClaim> {
    const value = JSON.stringify({ run_id: runId, fingerprint });
    // SET NX GET: one atomic step that either claims or returns the earlier claim.
    const previous = await this.redis.set(this.keys.idempotency(accountId, key), value, 'PX', ttlMs, 'NX', 'GET');
    if (previous === null) return { runId, fingerprint, claimed: true };
    const earlier = JSON.parse(previous) as { run_id: string; fingerprint: string };
    return { runId: earlier.run_id, fingerprint: earlier.fingerprint, claimed: false };
  }

  async release(accountId: string, key: string, runId: string): Promise<void> {
    // The claim names a run or a batch; whichever of the two was created keeps it.
    const keys = [this.keys.idempotency(accountId, key), this.keys.run(runId), this.keys.batch(runId)];
    await redisScripts.run(this.redis, 'releaseClaim', keys, [runId]);
  }
}
