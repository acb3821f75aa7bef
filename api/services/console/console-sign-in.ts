import { createHash, randomBytes } from 'node:crypto';
import type { RedisClient } from '../../../models/redis-connection.js';
import { NotFoundError, UnauthorizedError } from '../../../models/errors.js';
import type { RedisKeys } from '../../../models/redis/keys.js';
import type { AccountStore } from '../../../models/stores.js';
import type { ApiKeyAuthenticator } from '../auth/api-key-authenticator.js';

export interface ConsoleSignInOptions {
  redis: RedisClient;
  keys: RedisKeys;
  accounts: AccountStore;
  auth: ApiKeyAuthenticator;
  /** How long a link stays good (CONSOLE_SIGN_IN_TTL_S). */
  ttlSeconds: number;
}

/** What redeeming a sign-in link gives the page: a fresh API key of the account, shown only now. */
export interface ConsoleSession {
  api_key: string;
  key_id: string;
  account_id: string;
}

const digest = (code: string) => createHash('sha256').update(code).digest('hex');

/**
 * One-time sign-in links of the console (docs/console.md): a link carries a random code in its
 * fragment (never sent in a request line, so never in an access log or a Referer); the page
 * trades it, once, for a new API key of the account, named for the console, which it keeps in
 * the tab's session storage. Redis holds only the code's hash and the account, and forgets both
 * at the first redemption (GETDEL) or when the link expires, on every instance alike. Kept in
 * Redis also when the stores are in MongoDB: a short-lived ticket, like a rate-limit bucket.
 */
export class ConsoleSignIn {
  constructor(private readonly opts: ConsoleSignInOptions) {}

  /** A new link's code for the account, good once within the TTL. */
  async createCode(accountId: string): Promise<{ code: string; expires_at: string }> {
    if (!(await this.opts.accounts.get(accountId))) throw new NotFoundError('account');
    const code = randomBytes(32).toString('base64url');
    await this.opts.redis.set(this.opts.keys.consoleSignIn(digest(code)), accountId, 'EX', this.opts.ttlSeconds);
    return { code, expires_at: new Date(Date.now() + this.opts.ttlSeconds * 1000).toISOString() };
  }

  /** Spends a code: the second redemption, like an unknown or expired code, is a 401. */
  async redeem(code: string): Promise<ConsoleSession> {
    const accountId = await this.opts.redis.getdel(this.opts.keys.consoleSignIn(digest(code)));
    if (!accountId) throw new UnauthorizedError('this sign-in link is unknown, used already or expired: ask for a new one, or sign in with an API key');
    const { record, key } = await this.opts.auth.createKey(accountId, 'console sign-in');
    return { api_key: key, key_id: record.id, account_id: accountId };
  }
}
