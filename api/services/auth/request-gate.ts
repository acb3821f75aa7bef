import type { RedisClient } from '../../../models/redis-connection.js';
import type { RedisKeys } from '../../../models/redis/keys.js';
import { gateCall, gateVerdict } from '../../../models/redis/gate-codec.js';
import { redisScripts } from '../../../models/redis/redis-scripts.js';
import type { GateCheck, GateVerdict } from '../../../models/types.js';

export interface RequestGateOptions {
  redis: RedisClient;
  keys: RedisKeys;
  /** Sustained requests per second per key; 0 turns limiting off. */
  perSecond: number;
  /** Requests allowed at once. */
  burst: number;
}

export type { GateVerdict };

/** The name of the one policy: each API key has its own bucket. */
const POLICY = 'key';

/** Whole seconds of a wait, as Retry-After and the draft's `t` give it: rounded up, at least 1. */
export const waitSeconds = (ms: number): number => Math.max(1, Math.ceil(ms / 1000));

/**
 * `n` as a Structured Field number (RFC 9651): an Integer when whole, else a Decimal, which
 * carries at most three fractional digits; null when that rounds it to 0 or it is too large.
 */
function structuredNumber(n: number): string | null {
  const milli = Math.round(n * 1000);
  if (milli <= 0 || n >= 1e12) return null;
  if (milli % 1000 === 0) return String(milli / 1000);
  return `${Math.trunc(milli / 1000)}.${String(milli % 1000).padStart(3, '0').replace(/0+$/, '')}`;
}

/** The API key a request presented: its lookup id, and its account (the gate's keys are in the account's slot on a cluster). */
export type GateKey = Pick<GateCheck, 'lookupId' | 'accountId'>;

export class RequestGate {
  private readonly interval: number;
  private readonly tolerance: number;

  /** The `RateLimit-Policy` field: the same for every key and every answer. */
  private readonly policy: string;

  constructor(private readonly opts: RequestGateOptions) {
    this.interval = opts.perSecond > 0 ? 1000 / opts.perSecond : 0;
    this.tolerance = this.interval * opts.burst;
    // The window: how long an emptied bucket takes to fill (whole ms first, so float noise cannot add a second).
    const window = Math.max(1, Math.ceil(Math.round(this.tolerance) / 1000));
    const rate = structuredNumber(opts.perSecond);
    this.policy = `"${POLICY}";q=${opts.burst};w=${window}${rate === null ? '' : `;switchyard-rate=${rate}`}`;
  }

  /**
   * The rate limit as HTTP header fields (docs/api.md "Limits"), none while limiting is off:
   * `RateLimit-Limit` and `RateLimit-Remaining` as they always were (the burst, and what is left
   * of it), and the IETF draft's `RateLimit-Policy` and `RateLimit` (draft-ietf-httpapi-ratelimit-headers),
   * which say what the burst is: a bucket of `q` requests that refills in `w` seconds, at
   * `switchyard-rate` per second, with `r` requests left and one more in `t` seconds.
   */
  fields(verdict: GateVerdict): Record<string, string> {
    if (this.opts.perSecond <= 0 || verdict.outcome === 'revoked' || (verdict.outcome === 'allowed' && verdict.remaining < 0)) return {};
    const [remaining, waitMs] = verdict.outcome === 'allowed' ? [verdict.remaining, verdict.nextMs] : [0, verdict.retryAfterMs];
    return {
      'RateLimit-Limit': String(this.opts.burst),
      'RateLimit-Remaining': String(remaining),
      'RateLimit-Policy': this.policy,
      RateLimit: `"${POLICY}";r=${remaining};t=${waitSeconds(waitMs)}`,
    };
  }

  /**
   * Checked once per authenticated request, in one Redis round trip (the requestGate script):
   * whether the key was revoked (on any instance, whatever the local cache says) and its rate limit.
   */
  async admit(key: GateKey): Promise<GateVerdict> {
    const { keys, args } = gateCall(this.opts.keys, this.check(key));
    return gateVerdict(await redisScripts.run(this.opts.redis, 'requestGate', keys, args));
  }

  /** What the gate checks for a key, for a store that runs the gate inside its own script. */
  check({ lookupId, accountId }: GateKey): GateCheck {
    return { lookupId, accountId, intervalMs: this.interval, toleranceMs: this.tolerance, limiting: this.opts.perSecond > 0 };
  }

  /** Marks a key revoked for every instance; kept well past any cache lifetime. */
  async markRevoked({ lookupId, accountId }: GateKey): Promise<void> {
    await this.opts.redis.set(this.opts.keys.revokedKey(lookupId, accountId), '1', 'EX', 7 * 86400);
  }
}
