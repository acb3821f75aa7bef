import { UnauthorizedError } from '../../../models/errors.js';
import { hashSecret, lookupIdOf, mintSecret, sameHash } from '../../../models/credentials.js';
import type { ApiKeyStore } from '../../../models/stores.js';
import type { ApiKeyRecord } from '../../../models/types.js';
import type { RequestGate } from './request-gate.js';

export interface ApiKeyAuthenticatorOptions {
  apiKeys: ApiKeyStore;
  gate: RequestGate;
  /** How long a key record is cached in this process. @defaultValue 60000 */
  cacheTtlMs: number;
  /** @defaultValue 10000 */
  maxCacheEntries?: number;
}

export interface Principal {
  accountId: string;
  keyId: string;
  lookupId: string;
}

/**
 * Turns a presented account key into a principal. Key records are cached per process; the
 * per-request gate (revocation marker + rate limit, one Redis round trip) is what makes a
 * revocation bite at once on every instance, cache or no cache.
 */
export class ApiKeyAuthenticator {
  private readonly cache = new Map<string, { record: ApiKeyRecord; expires: number }>();
  private readonly maxEntries: number;

  constructor(private readonly opts: ApiKeyAuthenticatorOptions) {
    this.maxEntries = opts.maxCacheEntries ?? 10_000;
  }

  /** Checks the key's hash in constant time; throws 401 for anything unknown, malformed or revoked. */
  async identify(secret: string): Promise<Principal> {
    const lookupId = lookupIdOf('sy', secret);
    if (!lookupId) throw new UnauthorizedError('the API key is malformed');
    const record = await this.lookup(lookupId);
    if (!record || !sameHash(hashSecret(secret), record.hash) || record.revoked_at) {
      throw new UnauthorizedError('the API key is not valid');
    }
    return { accountId: record.account_id, keyId: record.id, lookupId };
  }

  private async lookup(lookupId: string): Promise<ApiKeyRecord | null> {
    const hit = this.cache.get(lookupId);
    if (hit && hit.expires > Date.now()) return hit.record;
    const record = await this.opts.apiKeys.findByLookupId(lookupId);
    // Unknown ids are not cached: a flood of random keys must not fill memory.
    if (record && this.opts.cacheTtlMs > 0) {
      if (this.cache.size >= this.maxEntries) this.cache.delete(this.cache.keys().next().value!);
      this.cache.set(lookupId, { record, expires: Date.now() + this.opts.cacheTtlMs });
    }
    return record;
  }

  /** Mints a key for an account; the plaintext is returned once and never stored. */
  async createKey(accountId: string, name: string | null): Promise<{ record: ApiKeyRecord; key: string }> {
    const minted = mintSecret('sy');
    const record: ApiKeyRecord = {
      id: `key_${minted.lookupId}`,
      account_id: accountId,
      prefix: minted.prefix,
      name,
      hash: minted.hash,
      created_at: new Date().toISOString(),
      revoked_at: null,
      max_running: null,
    };
    await this.opts.apiKeys.insert(record, minted.lookupId);
    return { record, key: minted.secret };
  }

  /** The account's keys, oldest first (their records: never the secrets). */
  listKeys(accountId: string): Promise<ApiKeyRecord[]> {
    return this.opts.apiKeys.list(accountId);
  }

  /** Revokes an account's key everywhere; null when the account has no such key. */
  async revokeKey(accountId: string, keyId: string): Promise<ApiKeyRecord | null> {
    const lookupId = keyId.replace(/^key_/, '');
    const existing = await this.lookup(lookupId);
    if (!existing || existing.account_id !== accountId) return null;
    // Marker first: if we crash before the store write, the key is already refused everywhere.
    await this.opts.gate.markRevoked({ lookupId, accountId });
    const record = await this.opts.apiKeys.revoke(accountId, keyId);
    this.cache.delete(lookupId);
    return record;
  }
}
