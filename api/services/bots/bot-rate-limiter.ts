import type { Redis } from 'ioredis';
import { ApiError } from '../../../models/errors.js';
import type { RedisKeys } from '../../../models/redis/keys.js';
import { LuaScript } from '../../../models/redis/lua-script.js';

/**
 * GCRA over several limiters at once, on Redis's clock: a message is admitted only if every
 * limiter has room, and only then does it count against all of them (a message refused by its
 * client's limit does not use up the bot's). KEYS: the limiters. ARGV: per key, the emission
 * interval and the burst tolerance (ms). Returns {0, 0} when admitted, else {wait ms, index of
 * the limiter that refused (1-based)}.
 */
const ADMIT = new LuaScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local after = {}
for i, key in ipairs(KEYS) do
  local interval = tonumber(ARGV[2 * i - 1])
  local tat = math.max(tonumber(redis.call('GET', key) or now), now)
  local wait = tat + interval - tonumber(ARGV[2 * i]) - now
  if wait > 0 then return { math.ceil(wait), i } end
  after[i] = tat + interval
end
for i, key in ipairs(KEYS) do
  redis.call('SET', key, after[i], 'PX', math.ceil(after[i] - now) + 1000)
end
return { 0, 0 }
`);

export interface BotRateLimiterOptions {
  redis: Redis;
  keys: RedisKeys;
  /** Messages per minute one bot accepts, from everyone together. */
  perBotPerMinute: number;
  /** Messages per minute one bot accepts from one client address. */
  perClientPerMinute: number;
}

/**
 * The bot surfaces' rate limits (docs/api.md "Tools and bots"): per bot and per bot and client
 * address, shared by every gateway instance. A limit of N per minute admits N at once, then one
 * every 60/N seconds.
 */
export class BotRateLimiter {
  constructor(private readonly opts: BotRateLimiterOptions) {}

  /** Counts one message; throws 429 `rate_limited` (with Retry-After) when a limit is reached. */
  async admit(botId: string, client: string): Promise<void> {
    const limits = [this.opts.perBotPerMinute, this.opts.perClientPerMinute];
    const args = limits.flatMap((perMinute) => [60_000 / perMinute, 60_000]);
    const keys = [this.opts.keys.rateLimit(`bot:${botId}`), this.opts.keys.rateLimit(`bot:${botId}:client:${client}`)];
    const [waitMs, which] = await ADMIT.run<[number, number]>(this.opts.redis, keys, args);
    if (waitMs === 0) return;
    const seconds = Math.max(1, Math.ceil(waitMs / 1000));
    const scope = which === 1 ? 'this bot' : 'this bot from your address';
    throw new ApiError('rate_limited', `too many messages for ${scope} (${limits[which - 1]} a minute); retry in ${seconds} s`, {
      headers: { 'Retry-After': String(seconds) },
      details: { retry_after_ms: waitMs, limit_per_minute: limits[which - 1], scope: which === 1 ? 'bot' : 'client' },
    });
  }
}
