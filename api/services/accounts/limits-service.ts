import { ApiError, NotFoundError } from '../../../models/errors.js';
import { findKind } from '../../../models/kinds.js';
import type { AccountStore, ApiKeyStore } from '../../../models/stores.js';
import type { Account, ApiKeyRecord } from '../../../models/types.js';

export interface LimitsServiceOptions {
  accounts: Pick<AccountStore, 'get' | 'setLimits'>;
  apiKeys: Pick<ApiKeyStore, 'list' | 'setMaxRunning'>;
  /** ACCOUNT_MAX_RUNNING and KEY_MAX_RUNNING (0: none). */
  accountMaxRunning: number;
  keyMaxRunning: number;
}

/** An account's limits as the API shows them: those in force (its own, else the defaults). */
export interface AccountLimitsView {
  account_id: string;
  weight: number;
  max_running: number | null;
  max_running_by_kind: Record<string, number>;
  keys: Array<{ id: string; max_running: number | null }>;
}

type ByKind = Record<string, number | null>;

/**
 * Concurrency limits and fair-share weights (docs/jobs.md, "Limits and fairness"). The admin sets
 * an account's `max_running`, its limits per kind and its weight, and any key's limit; an
 * account sets its own keys' limits and its limits per kind, never above its `max_running`.
 * Dispatch reads them through a cache of about a second (dispatch/concurrency-gate.ts).
 */
export class LimitsService {
  constructor(private readonly opts: LimitsServiceOptions) {}

  async get(accountId: string): Promise<AccountLimitsView> {
    const account = await this.account(accountId);
    return this.view(account, await this.opts.apiKeys.list(accountId));
  }

  /** The admin's change: the account's `max_running` (null: the default), limits per kind, weight. */
  async setByAdmin(accountId: string, body: { max_running?: number | null; max_running_by_kind?: ByKind; weight?: number }): Promise<AccountLimitsView> {
    if (body.max_running_by_kind) this.checkKinds(body.max_running_by_kind, null);
    const account = await this.opts.accounts.setLimits(accountId, body);
    if (!account) throw new NotFoundError('account');
    return this.view(account, await this.opts.apiKeys.list(accountId));
  }

  /** The account's own change of its limits per kind: none above its `max_running`. */
  async setByAccount(accountId: string, body: { max_running_by_kind: ByKind }): Promise<AccountLimitsView> {
    const current = await this.account(accountId);
    this.checkKinds(body.max_running_by_kind, this.accountMax(current));
    const account = await this.opts.accounts.setLimits(accountId, { max_running_by_kind: body.max_running_by_kind });
    if (!account) throw new NotFoundError('account');
    return this.view(account, await this.opts.apiKeys.list(accountId));
  }

  /** A key's `max_running` (null: the default); by the account itself (`capped`) never above its account's. */
  async setKey(accountId: string, keyId: string, max: number | null, capped: boolean): Promise<AccountLimitsView> {
    const account = await this.account(accountId);
    const cap = capped ? this.accountMax(account) : null;
    if (cap !== null && max !== null && max > cap) {
      throw new ApiError('invalid_request', `max_running ${max} is above the account's own limit of ${cap}`, { details: { path: '/max_running', limit: cap } });
    }
    if (!(await this.opts.apiKeys.setMaxRunning(accountId, keyId, max))) throw new NotFoundError('API key');
    return this.view(account, await this.opts.apiKeys.list(accountId));
  }

  private async account(accountId: string): Promise<Account> {
    const account = await this.opts.accounts.get(accountId);
    if (!account) throw new NotFoundError('account');
    return account;
  }

  private accountMax(a: Account): number | null {
    const max = a.max_running ?? this.opts.accountMaxRunning;
    return max > 0 ? max : null;
  }

  /** Each kind known, and its limit not above `cap` (when there is one). */
  private checkKinds(byKind: ByKind, cap: number | null): void {
    for (const [kind, max] of Object.entries(byKind)) {
      if (!findKind(kind)) throw new ApiError('invalid_request', `unknown kind ${JSON.stringify(kind)}`, { details: { path: `/max_running_by_kind/${kind}` } });
      if (cap !== null && max !== null && max > cap) {
        throw new ApiError('invalid_request', `max_running_by_kind ${kind}: ${max} is above the account's own limit of ${cap}`, { details: { path: `/max_running_by_kind/${kind}`, limit: cap } });
      }
    }
  }

  private view(a: Account, keys: ApiKeyRecord[]): AccountLimitsView {
    const keyDefault = this.opts.keyMaxRunning > 0 ? this.opts.keyMaxRunning : null;
    return {
      account_id: a.id,
      weight: a.weight,
      max_running: this.accountMax(a),
      max_running_by_kind: a.max_running_by_kind,
      keys: keys.filter((k) => !k.revoked_at).map((k) => ({ id: k.id, max_running: k.max_running ?? keyDefault })),
    };
  }
}
