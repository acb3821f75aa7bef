import type { GateCheck, GateVerdict } from '../types.js';
import type { RedisKeys } from './keys.js';

/**
 * The request gate's keys and arguments as the scripts that run it take them (requestGate, and
 * gatedCreateRun after the create's own): the key's revocation marker and limiter, then the
 * emission interval, the burst tolerance and whether limiting is on.
 */
export function gateCall(keys: RedisKeys, check: GateCheck): { keys: [string, string]; args: [number, number, '1' | '0'] } {
  return {
    keys: [keys.revokedKey(check.lookupId, check.accountId), keys.keyRateLimit(check.lookupId, check.accountId)],
    args: [check.intervalMs, check.toleranceMs, check.limiting ? '1' : '0'],
  };
}

/**
 * The gate's reply, as both scripts return it: {1 allowed | 0 limited | -1 revoked, wait ms,
 * remaining}. The wait is the limited request's retry after, or the allowed one's `nextMs`.
 */
export function gateVerdict([verdict, waitMs, remaining]: [number, number, number]): GateVerdict {
  if (verdict === -1) return { outcome: 'revoked' };
  if (verdict === 0) return { outcome: 'limited', retryAfterMs: waitMs };
  return { outcome: 'allowed', remaining, nextMs: waitMs };
}
