import { defineScript } from '../script-definition.js';

/**
 * Checks a custom tool's name and the account's count and writes both keys in one script, so
 * concurrent creates of one name get exactly one winner and an account never passes its limit.
 * KEYS: the account's name index, the tool. ARGV: name, id, account id, limit, doc.
 */
export const createTool = defineScript<'created' | 'name_conflict' | 'limit_reached'>({
  name: 'createTool',
  keys: 2,
  lua: `
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then return 'name_conflict' end
if redis.call('HLEN', KEYS[1]) >= tonumber(ARGV[4]) then return 'limit_reached' end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('HSET', KEYS[2], 'account_id', ARGV[3], 'name', ARGV[1], 'doc', ARGV[5])
return 'created'
`,
});
