import { createHash } from 'node:crypto';
import type { ClientSession, Collection } from 'mongodb';
import type { IdempotencyClaim, IdempotencyStore } from '../stores.js';
import { isDuplicateKey } from './mongo-errors.js';

/** A claim: `_id` is `${accountId}:${sha256(key)}`; a TTL index on `expires_at` removes it. */
export interface IdempotencyDoc {
  _id: string;
  run_id: string;
  fingerprint: string;
  expires_at: Date;
  /**
   * Set in the transaction that creates the run (or batch) the claim names (`markClaimCreated`):
   * such a claim is never released. The mark and the release's delete touch the one document,
   * so MongoDB orders them: a create never follows a release of its own claim.
   */
  created?: true;
}

/** A claim's `_id`. */
export function claimId(accountId: string, key: string): string {
  return `${accountId}:${createHash('sha256').update(key).digest('hex')}`;
}

/**
 * Marks the live claim of `key` as having made `id`, inside the create's transaction; false when
 * the claim no longer names `id` (released, expired or taken by another request): the create
 * must then make nothing.
 */
export async function markClaimCreated(claims: Collection<IdempotencyDoc>, session: ClientSession, accountId: string, key: string, id: string): Promise<boolean> {
  const marked = await claims.updateOne({ _id: claimId(accountId, key), run_id: id, expires_at: { $gt: new Date() } }, { $set: { created: true } }, { session });
  return marked.matchedCount === 1;
}

/** Thrown inside a create's transaction to abort it whole when `markClaimCreated` found the claim gone. */
export class ClaimLostError extends Error {
  constructor() {
    super('the Idempotency-Key no longer names this record');
  }
}

/** Claims that vanish between our failed upsert and our read (TTL monitor, a release) are retried this often. */
const MAX_ATTEMPTS = 3;

export class MongoIdempotencyStore implements IdempotencyStore {
  constructor(private readonly claims: Collection<IdempotencyDoc>) {}

  async claim(accountId: string, key: string, fingerprint: string, runId: string, ttlMs: number): Promise<IdempotencyClaim> {
    const _id = claimId(accountId, key);
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
      const now = new Date();
      try {
        // One atomic step that claims an absent key or takes over an expired claim the TTL
        // monitor (which runs about once a minute) has not removed yet. A live claim does not
        // match the filter, so the upsert tries to insert its _id and fails with E11000.
        await this.claims.updateOne(
          { _id, expires_at: { $lte: now } },
          { $set: { run_id: runId, fingerprint, expires_at: new Date(now.getTime() + ttlMs) }, $unset: { created: '' } },
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
    // A claim whose run or batch was made (`created`) stays: see markClaimCreated.
    await this.claims.deleteOne({ _id: claimId(accountId, key), run_id: runId, created: { $ne: true } });
  }
}
