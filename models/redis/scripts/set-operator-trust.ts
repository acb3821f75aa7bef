import { defineScript } from '../script-definition.js';

/**
 * Sets an operator's trust only if the operator exists: a trust change must not create a half
 * record. KEYS: the operator. ARGV: trust. Returns 1, or 0 when there is no such operator.
 */
export const setOperatorTrust = defineScript<number>({
  name: 'setOperatorTrust',
  keys: 1,
  lua: `
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('HSET', KEYS[1], 'trust', ARGV[1])
return 1
`,
});
