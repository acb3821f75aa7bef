import { defineScript } from '../script-definition.js';

/**
 * Sets an API key's `max_running` if the key is the account's. KEYS: the key's record.
 * ARGV: account id, limit ('' : the default again). Returns 1, or 0 when it is not the account's.
 */
export const setKeyMaxRunning = defineScript<number>({
  name: 'setKeyMaxRunning',
  keys: 1,
  lua: `
if redis.call('HGET', KEYS[1], 'account_id') ~= ARGV[1] then return 0 end
if ARGV[2] == '' then redis.call('HDEL', KEYS[1], 'max_running') else redis.call('HSET', KEYS[1], 'max_running', ARGV[2]) end
return 1
`,
});
