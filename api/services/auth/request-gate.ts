import type { Redis } from 'ioredis';
import type { RedisKeys } from '../../../models/redis/keys.js';
import { LuaScript } from '../../../models/redis/lua-script.js';

/**
 * Checked once per authenticated request, in one Redis round trip: whether the key was
 * revoked (on any instance, whatever the local cache says) and the key's rate limit (GCRA
 * on Redis's clock, so instances with skewed clocks agree).
 * KEYS: revoked marker, limiter. ARGV: emission interval ms, burst tolerance ms, limiting on (1/0).
 * Returns {1 allowed | 0 limited | -1 revoked, retry after ms, remaining}.
 */
const GATE = new LuaScript(`
if redis.call('EXISTS', KEYS[1]) == 1 then return { -1, 0, 0 } end
if ARGV[3] == '0' then return { 1, 0, -1 } end
local interval = tonumber(ARGV[1])
local tolerance = tonumber(ARGV[2])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local tat = tonumber(redis.call('GET', KEYS[2]) or now)
if tat < now then tat = now end
local new_tat = tat + interval
if new_tat - tolerance > now then return { 0, math.ceil(new_tat - tolerance - now), 0 } end
redis.call('SET', KEYS[2], new_tat, 'PX', math.ceil(new_tat - now) + 1000)
return { 1, 0, math.floor((tolerance - (new_tat - now)) / interval) }
`);

export interface RequestGateOptions {
  redis: Redis;
  keys: RedisKeys;
  /** Sustained requests per second per key; 0 turns limiting off. */
  perSecond: number;
  /** Requests allowed at once. */
  burst: number;
}

export type GateVerdict =
  | { outcome: 'allowed'; remaining: number }
  | { outcome: 'limited'; retryAfterMs: number }
  | { outcome: 'revoked' };

export class RequestGate {
  private readonly interval: number;
  private readonly tolerance: number;

  constructor(private readonly opts: RequestGateOptions) {
    this.interval = opts.perSecond > 0 ? 1000 / opts.perSecond : 0;
    this.tolerance = this.interval * opts.burst;
  }

  get limit(): number {
    return this.opts.burst;
  }

  async admit(lookupId: string): Promise<GateVerdict> {
    const [verdict, retryAfterMs, remaining] = await GATE.run<[number, number, number]>(
      this.opts.redis,
      [this.opts.keys.revokedKey(lookupId), this.opts.keys.rateLimit(`key:${lookupId}`)],
      [this.interval, this.tolerance, this.opts.perSecond > 0 ? '1' : '0'],
    );
    if (verdict === -1) return { outcome: 'revoked' };
    if (verdict === 0) return { outcome: 'limited', retryAfterMs };
    return { outcome: 'allowed', remaining };
  }

  /** Marks a key revoked for every instance; kept well past any cache lifetime. */
  async markRevoked(lookupId: string): Promise<void> {
    await this.opts.redis.set(this.opts.keys.revokedKey(lookupId), '1', 'EX', 7 * 86400);
  }
}
