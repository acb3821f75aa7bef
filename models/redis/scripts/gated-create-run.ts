import { defineScript } from '../script-definition.js';
import { createRunFunction } from './includes/create-run.js';
import { requestGateFunction } from './includes/request-gate.js';

/**
 * The request gate and createRun in one script: a submission's revocation check, rate limit,
 * credit reservation and run record in one round trip instead of two.
 * KEYS: createRun's four, then the revoked marker and the limiter.
 * ARGV: createRun's twelve, then the gate's three (interval ms, tolerance ms, limiting '1'/'0').
 * Returns the gate's refusal ({-1, 0, 0} or {0, retry after ms, 0}: a number first), or
 * createRun's reply with the limiter's wait for one more request (ms) and its remaining
 * requests appended.
 */
export const gatedCreateRun = defineScript<[string, ...string[]] | [number, number, number]>({
  name: 'gatedCreateRun',
  keys: 6,
  lua: `${requestGateFunction}${createRunFunction}
local refusal, remaining, next_ms = request_gate(KEYS[5], KEYS[6], ARGV[13], ARGV[14], ARGV[15])
if refusal then return refusal end
local reply = create_run()
reply[#reply + 1] = next_ms
reply[#reply + 1] = remaining
return reply
`,
});
