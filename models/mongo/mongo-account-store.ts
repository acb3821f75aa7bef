import type { Collection } from 'mongodb';
import { NotFoundError } from '../errors.js';
import { newAccountId } from '../ids.js';
import type { AccountStore } from '../stores.js';
import { ACCOUNT_LIMIT_DEFAULTS, type Account, type AccountLimits, type WebhookSecret } from '../types.js';

/** An account as stored: the account id is the `_id`; `in_flight_by_kind` feeds the fair-share rank (models/fair-share.ts). */
export type AccountDoc = Omit<Account, 'id' | keyof AccountLimits> &
  Partial<AccountLimits> & { _id: string; webhook_secret?: WebhookSecret; in_flight_by_kind?: Record<string, number> };

export function toAccount(d: AccountDoc): Account {
  return {
    id: d._id,
    name: d.name,
    credits: d.credits,
    reserved: d.reserved ?? 0,
    in_flight: d.in_flight ?? 0,
    created_at: d.created_at,
    weight: d.weight ?? ACCOUNT_LIMIT_DEFAULTS.weight,
    max_running: d.max_running ?? null,
    max_running_by_kind: d.max_running_by_kind ?? {},
    budget: d.budget ?? null,
    spent: d.spent ?? 0,
    spent_period: d.spent_period ?? null,
  };
}

export class MongoAccountStore implements AccountStore {
  constructor(private readonly accounts: Collection<AccountDoc>) {}

  async create(input: { name: string; credits: number }): Promise<Account> {
    const doc: AccountDoc = { _id: newAccountId(), name: input.name, credits: input.credits, reserved: 0, in_flight: 0, created_at: new Date().toISOString() };
    await this.accounts.insertOne(doc);
    return toAccount(doc);
  }

  async get(id: string): Promise<Account | null> {
    const doc = await this.accounts.findOne({ _id: id });
    return doc ? toAccount(doc) : null;
  }

  async setLimits(id: string, limits: Partial<Omit<AccountLimits, 'max_running_by_kind'>> & { max_running_by_kind?: Record<string, number | null> }): Promise<Account | null> {
    const set: Record<string, unknown> = {};
    const unset: Record<string, ''> = {};
    if (limits.weight !== undefined) set.weight = limits.weight;
    if (limits.max_running !== undefined) {
      if (limits.max_running === null) unset.max_running = '';
      else set.max_running = limits.max_running;
    }
    for (const [kind, limit] of Object.entries(limits.max_running_by_kind ?? {})) {
      if (limit === null) unset[`max_running_by_kind.${kind}`] = '';
      else set[`max_running_by_kind.${kind}`] = limit;
    }
    const update = { ...(Object.keys(set).length > 0 && { $set: set }), ...(Object.keys(unset).length > 0 && { $unset: unset }) };
    // Nothing to change (an empty map of kinds): an update with no operator is refused by MongoDB.
    const doc = Object.keys(update).length === 0 ? await this.accounts.findOne({ _id: id }) : await this.accounts.findOneAndUpdate({ _id: id }, update, { returnDocument: 'after' });
    return doc ? toAccount(doc) : null;
  }

  async adjustCredits(id: string, delta: number): Promise<Account | null> {
    // The guard makes check-and-add one atomic step: credits + delta >= 0 <=> credits >= -delta.
    // It applies for any delta, as in the Redis script (a positive delta cannot lift a negative
    // balance that stays negative).
    const doc = await this.accounts.findOneAndUpdate(
      { _id: id, credits: { $gte: -delta } },
      { $inc: { credits: delta } },
      { returnDocument: 'after' },
    );
    if (doc) return toAccount(doc);
    // No match: either the account is unknown or the balance refused the change.
    if (!(await this.accounts.findOne({ _id: id }, { projection: { _id: 1 } }))) throw new NotFoundError('account');
    return null;
  }

  async setBudget(id: string, budget: number | null): Promise<Account> {
    const doc = await this.accounts.findOneAndUpdate({ _id: id }, budget === null ? { $unset: { budget: '' } } : { $set: { budget } }, { returnDocument: 'after' });
    if (!doc) throw new NotFoundError('account');
    return toAccount(doc);
  }

  async webhookSecret(id: string, candidate: WebhookSecret): Promise<WebhookSecret> {
    // A single-document update is atomic: of concurrent first reads, one sets it, the others
    // no longer match the filter and read the winner's.
    await this.accounts.updateOne({ _id: id, webhook_secret: { $exists: false } }, { $set: { webhook_secret: candidate } });
    const doc = await this.accounts.findOne({ _id: id }, { projection: { webhook_secret: 1 } });
    if (!doc?.webhook_secret) throw new NotFoundError('account');
    return { secret: doc.webhook_secret.secret, created_at: doc.webhook_secret.created_at };
  }

  async setWebhookSecret(id: string, secret: WebhookSecret): Promise<WebhookSecret> {
    const { matchedCount } = await this.accounts.updateOne({ _id: id }, { $set: { webhook_secret: secret } });
    if (matchedCount === 0) throw new NotFoundError('account');
    return secret;
  }
}
