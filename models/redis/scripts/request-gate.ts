import { defineScript } from '../script-definition.js';
import { requestGateFunction } from './includes/request-gate.js';

/**
 * Checked once per authenticated request, in one round trip: whether the key was revoked (on
 * any instance, whatever the local cache says) and the key's rate limit.
 * KEYS: revoked marker, limiter. ARGV: emission interval ms, burst tolerance ms, limiting on ('1'/'0').
 * Returns {1 allowed | 0 limited | -1 revoked, wait ms, remaining} (gate-codec.ts decodes it).
 */
export const requestGate = defineScript<[number, number, number]>({
  name: 'requestGate',
  keys: 2,
  lua: `${requestGateFunction}
local refusal, remaining, next_ms = request_gate(KEYS[1], KEYS[2], ARGV[1], ARGV[2], ARGV[3])
if refusal then return refusal end
return { 1, next_ms, remaining }
`,
});
