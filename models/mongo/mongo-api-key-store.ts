import type { Collection } from 'mongodb';
import type { ApiKeyStore } from '../stores.js';
import type { ApiKeyRecord } from '../types.js';

/** An API key as stored: `_id` is the lookup id embedded in the key string. */
export type ApiKeyDoc = ApiKeyRecord & { _id: string };

/** Copies the record's own fields, so `_id` never leaks. */
function toApiKey(d: ApiKeyRecord): ApiKeyRecord {
  return {
    id: d.id,
    account_id: d.account_id,
    prefix: d.prefix,
    // Like the Redis store, an empty name reads back as null.
    name: d.name ? d.name : null,
    hash: d.hash,
    created_at: d.created_at,
    revoked_at: d.revoked_at ?? null,
    max_running: d.max_running ?? null,
  };
}

export class MongoApiKeyStore implements ApiKeyStore {
  constructor(private readonly keys: Collection<ApiKeyDoc>) {}

  async insert(record: ApiKeyRecord, lookupId: string): Promise<void> {
    // A new key is never revoked (the Redis store drops revoked_at on insert too).
    const { id, account_id, prefix, name, hash, created_at } = record;
    await this.keys.insertOne({ _id: lookupId, id, account_id, prefix, name, hash, created_at, revoked_at: null, max_running: record.max_running ?? null });
  }

  async findByLookupId(lookupId: string): Promise<ApiKeyRecord | null> {
    const doc = await this.keys.findOne({ _id: lookupId });
    return doc ? toApiKey(doc) : null;
  }

  async list(accountId: string): Promise<ApiKeyRecord[]> {
    // _id orders like the public id (`key_` + _id), so this is "created_at, then id".
    const docs = await this.keys.find({ account_id: accountId }).sort({ created_at: 1, _id: 1 }).toArray();
    return docs.map(toApiKey);
  }

  async setMaxRunning(accountId: string, id: string, max: number | null): Promise<ApiKeyRecord | null> {
    const lookupId = id.replace(/^key_/, '');
    if (!/^[a-z2-7]{16}$/.test(lookupId)) return null;
    const doc = await this.keys.findOneAndUpdate({ _id: lookupId, account_id: accountId }, { $set: { max_running: max } }, { returnDocument: 'after' });
    return doc ? toApiKey(doc) : null;
  }

  async revoke(accountId: string, id: string): Promise<ApiKeyRecord | null> {
    const lookupId = id.replace(/^key_/, '');
    if (!/^[a-z2-7]{16}$/.test(lookupId)) return null;
    // A pipeline update keeps the first revocation time in one atomic step.
    const doc = await this.keys.findOneAndUpdate(
      { _id: lookupId, account_id: accountId },
      [{ $set: { revoked_at: { $ifNull: ['$revoked_at', { $literal: new Date().toISOString() }] } } }],
      { returnDocument: 'after' },
    );
    return doc ? toApiKey(doc) : null;
  }
}
