import type { Redis } from 'ioredis';
import { NotFoundError } from '../errors.js';
import { newAccountId } from '../ids.js';
import type { AccountStore } from '../stores.js';
import type { Account } from '../types.js';
import type { RedisKeys } from './keys.js';

const ADJUST = `
local credits = redis.call('HGET', KEYS[1], 'credits')
if not credits then return -1 end
if tonumber(credits) + tonumber(ARGV[1]) < 0 then return 0 end
redis.call('HINCRBY', KEYS[1], 'credits', ARGV[1])
return 1
`;

export function decodeAccount(h: Record<string, string>): Account | null {
  if (!h.id) return null;
  return {
    id: h.id,
    name: h.name,
    credits: Number(h.credits),
    reserved: Number(h.reserved ?? 0),
    in_flight: Number(h.in_flight ?? 0),
    created_at: h.created_at,
  };
}

export class RedisAccountStore implements AccountStore {
  constructor(private readonly redis: Redis, private readonly keys: RedisKeys) {}

  async create(input: { name: string; credits: number }): Promise<Account> {
    const account: Account = { id: newAccountId(), name: input.name, credits: input.credits, reserved: 0, in_flight: 0, created_at: new Date().toISOString() };
    await this.redis.hset(this.keys.account(account.id), { ...account });
    return account;
  }

  async get(id: string): Promise<Account | null> {
    return decodeAccount(await this.redis.hgetall(this.keys.account(id)));
  }

  async adjustCredits(id: string, delta: number): Promise<Account | null> {
    const result = (await this.redis.eval(ADJUST, 1, this.keys.account(id), String(delta))) as number;
    if (result === -1) throw new NotFoundError('account');
    if (result === 0) return null;
    return this.get(id);
  }
}
