import type { GateCheck, GateVerdict } from '../types.js';
import type { RedisKeys } from './keys.js';

/**
 * The request gate's check in Lua: the key's revocation marker, then its rate limit (GCRA on
 * Redis's clock, so instances with skewed clocks agree). A fragment, not a script: the gate
 * runs it alone (api/services/auth/request-gate.ts) and the submission runs it in the same
 * script as the run's create (gated-create.ts), saving a round trip per accepted job.
 * Uses KEYS[rk] (revoked marker) and KEYS[lk] (limiter), ARGV[a] (emission interval ms),
 * ARGV[a+1] (burst tolerance ms) and ARGV[a+2] (limiting on, '1'/'0'). Returns early with
 * {-1, 0, 0} (revoked) or {0, retry after ms, 0} (limited); otherwise leaves `gate_remaining`
 * (-1 when limiting is off) and `gate_next_ms`, the wait until the key may make one request
 * more than `gate_remaining` (the limited answer's retry after, one request later).
 */
export function gateLua(rk: number, lk: number, a: number): string {
  return `
local gate_remaining = -1
local gate_next_ms = 0
if redis.call('EXISTS', KEYS[${rk}]) == 1 then return { -1, 0, 0 } end
if ARGV[${a + 2}] == '1' then
  local interval = tonumber(ARGV[${a}])
  local tolerance = tonumber(ARGV[${a + 1}])
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local tat = tonumber(redis.call('GET', KEYS[${lk}]) or now)
  if tat < now then tat = now end
  local new_tat = tat + interval
  if new_tat - tolerance > now then return { 0, math.ceil(new_tat - tolerance - now), 0 } end
  redis.call('SET', KEYS[${lk}], new_tat, 'PX', math.ceil(new_tat - now) + 1000)
  local room = tolerance - (new_tat - now)
  gate_remaining = math.floor(room / interval)
  gate_next_ms = math.ceil((gate_remaining + 1) * interval - room)
end
`;
}

/** The gate's two keys and three arguments for a check (see `gateLua`), as both scripts take them. */
export function gateCall(keys: RedisKeys, check: GateCheck): { keys: [string, string]; args: [number, number, '1' | '0'] } {
  return {
    keys: [keys.revokedKey(check.lookupId), keys.rateLimit(`key:${check.lookupId}`)],
    args: [check.intervalMs, check.toleranceMs, check.limiting ? '1' : '0'],
  };
}

/**
 * The gate's answer, as both scripts return it: {1 allowed | 0 limited | -1 revoked, wait ms, remaining}.
 * The wait is the limited request's retry after, or the allowed one's `nextMs`.
 */
export function gateVerdict([verdict, waitMs, remaining]: [number, number, number]): GateVerdict {
  if (verdict === -1) return { outcome: 'revoked' };
  if (verdict === 0) return { outcome: 'limited', retryAfterMs: waitMs };
  return { outcome: 'allowed', remaining, nextMs: waitMs };
}
