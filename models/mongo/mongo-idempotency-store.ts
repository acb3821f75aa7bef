import { createHash } from 'node:crypto';
import type { Collection } from 'mongodb';
import type { IdempotencyClaim, IdempotencyStore } from '../stores.js';
import { isDuplicateKey } from './mongo-errors.js';

/** A claim: `_id` is `${accountId}:${sha256(key)}`; a TTL index on `expires_at` removes it. */
export interface IdempotencyDoc {
  _id: string;
  run_id: string;
  fingerprint: string;
  expires_at: Date;
}

/** Claims that vanish between our failed upsert and our read (TTL monitor, a release) are retried this often. */
const MAX_ATTEMPTS = 3;

export class MongoIdempotencyStore implements IdempotencyStore {
  constructor(private readonly claims: Collection<IdempotencyDoc>) {}

  private id(accountId: string, key: string): string {
    return `${accountId}:${createHash('sha256').update(key).digest('hex')}`;
  }

  async claim(accountId: string, key: string, fingerprint: string, runId: string, ttlMs: number): Promise<IdempotencyClaim> {
    const _id = this.id(accountId, key);
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
      const now = new Date();
      try {
        // One atomic step that claims an absent key or takes over an expired claim the TTL
        // monitor (which runs about once a minute) has not removed yet. A live claim does not
        // match the filter, so the upsert tries to insert its _id and fails with E11000.
        await this.claims.updateOne(
          { _id, expires_at: { $lte: now } },
          { $set: { run_id: runId, fingerprint, expires_at: new Date(now.getTime() + ttlMs) } },
          { upsert: true },
        );
        return { runId, fingerprint, claimed: true };
      } catch (err) {
        if (!isDuplicateKey(err)) throw err;
      }
      const earlier = await this.claims.findOne({ _id });
      if (earlier) return { runId: earlier.run_id, fingerprint: earlier.fingerprint, claimed: false };
    }
    throw new Error(`idempotency claim ${_id} kept changing; gave up after ${MAX_ATTEMPTS} attempts`);
  }

  async release(accountId: string, key: string, runId: string): Promise<void> {
    await this.claims.deleteOne({ _id: this.id(accountId, key), run_id: runId });
  }
}
