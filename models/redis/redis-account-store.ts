import type { RedisClient } from '../redis-connection.js';
import { NotFoundError } from '../errors.js';
import { newAccountId } from '../ids.js';
import type { AccountStore } from '../stores.js';
import { ACCOUNT_LIMIT_DEFAULTS, type Account, type AccountLimits, type WebhookSecret } from '../types.js';
import type { RedisKeys } from './keys.js';
import { redisScripts } from './redis-scripts.js';

export function decodeAccount(h: Record<string, string>): Account | null {
  if (!h.id) return null;
  return {
    id: h.id,
    name: h.name,
    credits: Number(h.credits),
    reserved: Number(h.reserved ?? 0),
    in_flight: Number(h.in_flight ?? 0),
    created_at: h.created_at,
    weight: h.weight ? Number(h.weight) : ACCOUNT_LIMIT_DEFAULTS.weight,
    max_running: h.max_running ? Number(h.max_running) : null,
    max_running_by_kind: h.max_running_by_kind ? (JSON.parse(h.max_running_by_kind) as Record<string, number>) : {},
    budget: h.budget ? Number(h.budget) : null,
    spent: Number(h.spent ?? 0),
    spent_period: h.spent_period ?? null,
  };
}

export class RedisAccountStore implements AccountStore {
  constructor(private readonly redis: RedisClient, private readonly keys: RedisKeys) {}

  async create(input: { name: string; credits: number }): Promise<Account> {
    const fields = { id: newAccountId(), name: input.name, credits: input.credits, reserved: 0, in_flight: 0, created_at: new Date().toISOString() };
    await this.redis.hset(this.keys.account(fields.id), fields);
    return { ...fields, ...ACCOUNT_LIMIT_DEFAULTS, max_running_by_kind: {}, budget: null, spent: 0, spent_period: null };
  }

  async get(id: string): Promise<Account | null> {
    return decodeAccount(await this.redis.hgetall(this.keys.account(id)));
  }

  async setLimits(id: string, limits: Partial<Omit<AccountLimits, 'max_running_by_kind'>> & { max_running_by_kind?: Record<string, number | null> }): Promise<Account | null> {
    const reply = await redisScripts.run(this.redis, 'setAccountLimits', [this.keys.account(id)], [
      limits.weight === undefined ? '' : String(limits.weight),
      limits.max_running === undefined ? '' : String(limits.max_running ?? 0),
      limits.max_running_by_kind === undefined ? '' : JSON.stringify(limits.max_running_by_kind),
    ]);
    return reply ? decodeAccount(await this.redis.hgetall(this.keys.account(id))) : null;
  }

  async adjustCredits(id: string, delta: number): Promise<Account | null> {
    const result = await redisScripts.run(this.redis, 'adjustCredits', [this.keys.account(id)], [String(delta)]);
    if (result === -1) throw new NotFoundError('account');
    if (result === 0) return null;
    return this.get(id);
  }

  async setBudget(id: string, budget: number | null): Promise<Account> {
    const key = this.keys.account(id);
    // Accounts are never deleted: one that exists now still does at the write.
    if (!(await this.redis.exists(key))) throw new NotFoundError('account');
    if (budget === null) await this.redis.hdel(key, 'budget');
    else await this.redis.hset(key, 'budget', budget);
    return (await this.get(id))!;
  }

  webhookSecret(id: string, candidate: WebhookSecret): Promise<WebhookSecret> {
    return this.writeWebhookSecret(id, candidate, false);
  }

  setWebhookSecret(id: string, secret: WebhookSecret): Promise<WebhookSecret> {
    return this.writeWebhookSecret(id, secret, true);
  }

  private async writeWebhookSecret(id: string, secret: WebhookSecret, replace: boolean): Promise<WebhookSecret> {
    const stored = await redisScripts.run(this.redis, 'writeWebhookSecret', [this.keys.account(id)], [JSON.stringify(secret), replace ? '1' : '0']);
    if (stored === null) throw new NotFoundError('account');
    return JSON.parse(stored) as WebhookSecret;
  }
}
