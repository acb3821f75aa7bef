import { defineScript } from '../script-definition.js';

/**
 * Takes back the attempt a fetch counted (BullMQ's `ats` field of the job hash), if the lock is
 * still the caller's. KEYS: the BullMQ job. ARGV: lock token. Returns 1, or 0 when the lock is not the caller's.
 */
export const uncountAttempt = defineScript<number>({
  name: 'uncountAttempt',
  keys: 1,
  lua: `
if redis.call('GET', KEYS[1] .. ':lock') ~= ARGV[1] then return 0 end
if tonumber(redis.call('HGET', KEYS[1], 'ats') or '0') > 0 then redis.call('HINCRBY', KEYS[1], 'ats', -1) end
return 1
`,
});
