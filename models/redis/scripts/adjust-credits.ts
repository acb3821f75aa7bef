import { defineScript } from '../script-definition.js';

/**
 * Adds a (possibly negative) amount to an account's credits unless that would take them below
 * zero. KEYS: the account. ARGV: delta. Returns 1 done, 0 refused (too few credits), -1 no such account.
 */
export const adjustCredits = defineScript<number>({
  name: 'adjustCredits',
  keys: 1,
  lua: `
local credits = redis.call('HGET', KEYS[1], 'credits')
if not credits then return -1 end
if tonumber(credits) + tonumber(ARGV[1]) < 0 then return 0 end
redis.call('HINCRBY', KEYS[1], 'credits', ARGV[1])
return 1
`,
});
