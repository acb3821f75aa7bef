import { ApiError, NotFoundError } from '../../../models/errors.js';
import type { AccountStore, WorkerTokenStore } from '../../../models/stores.js';
import type { Account, WorkerTokenRecord } from '../../../models/types.js';
import type { ApiKeyAuthenticator } from '../auth/api-key-authenticator.js';
import { issueWorkerToken } from '../fleet/worker-tokens.js';

const ACCOUNT_ID = /^acct_[0-9A-HJKMNP-TV-Z]{26}$/;

export interface AccountServiceOptions {
  accounts: Pick<AccountStore, 'create' | 'get' | 'adjustCredits' | 'setBudget'>;
  /** Mints a new account's first API key. */
  keys: Pick<ApiKeyAuthenticator, 'createKey'>;
  workerTokens: WorkerTokenStore;
}

/**
 * Accounts: opening one with its first API key, its balance, and the worker tokens it mints
 * for its own machines. (Its API keys are the authenticator's, which must see every change.)
 */
export class AccountService {
  constructor(private readonly opts: AccountServiceOptions) {}

  async get(accountId: string): Promise<Account> {
    const account = await this.opts.accounts.get(accountId);
    if (!account) throw new NotFoundError('account');
    return account;
  }

  /** Creates an account and its first API key, shown only now. */
  async open(input: { name: string; credits: number }): Promise<{ account: Account; apiKey: string }> {
    const account = await this.opts.accounts.create(input);
    const { key } = await this.opts.keys.createKey(account.id, 'initial');
    return { account, apiKey: key };
  }

  /** Adds `delta` (may be negative) to the balance: 404 for an unknown account, 409 when it would go below zero. */
  async adjustCredits(accountId: string, delta: number): Promise<Account> {
    // A malformed id is looked up nowhere: it is simply not an account.
    if (!ACCOUNT_ID.test(accountId)) throw new NotFoundError('account');
    const account = await this.opts.accounts.adjustCredits(accountId, delta);
    if (!account) throw new ApiError('conflict', 'the balance would go below zero', { details: { delta } });
    return account;
  }

  /** Sets (null: removes) the monthly budget (docs/jobs.md, "Cost"): 404 for an unknown account. */
  setBudget(accountId: string, budget: number | null): Promise<Account> {
    if (!ACCOUNT_ID.test(accountId)) throw new NotFoundError('account');
    return this.opts.accounts.setBudget(accountId, budget);
  }

  /** A worker token for the account's own machines, shown only now: open trust, whatever they are (docs/confidentiality.md). */
  issueWorkerToken(accountId: string): Promise<{ record: WorkerTokenRecord; token: string }> {
    return issueWorkerToken(this.opts.workerTokens, { type: 'account', id: accountId }, 'open');
  }
}
