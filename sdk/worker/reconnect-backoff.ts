import type { ReconnectOptions } from './worker-options.js';

/**
 * The wait before the next connection try, after `failedTries` tries that did not hold:
 * "full jitter", uniformly between 0 and the capped exponential bound
 * `min(maxDelayMs, initialDelayMs * factor ** failedTries)`. When a gateway instance restarts,
 * every worker it held loses its socket in the same instant; drawing each wait over the whole
 * bound (rather than its upper half, "equal jitter") spreads their registrations over twice the
 * time, so the instance and Redis see a ramp instead of a wall (bench/fleet.ts measures it).
 * `random` is injectable so the policy is tested without timers.
 */
export function reconnectDelay(backoff: Required<ReconnectOptions>, failedTries: number, random: () => number = Math.random): number {
  const { initialDelayMs, maxDelayMs, factor } = backoff;
  const cap = Math.min(maxDelayMs, initialDelayMs * factor ** failedTries);
  return random() * cap;
}
