import type { RedisClient } from '../../../models/redis-connection.js';
import { ApiError } from '../../../models/errors.js';
import type { RedisKeys } from '../../../models/redis/keys.js';
import { redisScripts } from '../../../models/redis/redis-scripts.js';

export interface BotRateLimiterOptions {
  redis: RedisClient;
  keys: RedisKeys;
  /** Messages per minute one bot accepts, from everyone together. */
  perBotPerMinute: number;
  /** Messages per minute one bot accepts from one client address. */
  perClientPerMinute: number;
}

/**
 * The bot surfaces' rate limits (docs/api.md "Tools and bots"): per bot and per bot and client
 * address, shared by every gateway instance (both checked in one admitBotMessage script, on
 * Redis's clock). A limit of N per minute admits N at once, then one every 60/N seconds.
 */
export class BotRateLimiter {
  constructor(private readonly opts: BotRateLimiterOptions) {}

  /** Counts one message; throws 429 `rate_limited` (with Retry-After) when a limit is reached. */
  async admit(botId: string, client: string): Promise<void> {
    const limits = [this.opts.perBotPerMinute, this.opts.perClientPerMinute];
    const args = limits.flatMap((perMinute) => [60_000 / perMinute, 60_000]);
    const keys = [this.opts.keys.botRateLimit(botId), this.opts.keys.botRateLimit(botId, client)];
    const [waitMs, which] = await redisScripts.run(this.opts.redis, 'admitBotMessage', keys, args);
    if (waitMs === 0) return;
    const seconds = Math.max(1, Math.ceil(waitMs / 1000));
    const scope = which === 1 ? 'this bot' : 'this bot from your address';
    throw new ApiError('rate_limited', `too many messages for ${scope} (${limits[which - 1]} a minute); retry in ${seconds} s`, {
      headers: { 'Retry-After': String(seconds) },
      details: { retry_after_ms: waitMs, limit_per_minute: limits[which - 1], scope: which === 1 ? 'bot' : 'client' },
    });
  }
}
