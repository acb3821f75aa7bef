import { defineScript } from '../script-definition.js';

/**
 * Checks the quota and writes an account file's record, its indexes and the account's byte
 * count in one script, so concurrent uploads of one account can never pass its quota together.
 * KEYS: byte count, record, account index, expiry index. ARGV: size, quota, doc, id, expiry ms.
 * Returns {1 created | 0 over quota, bytes used}.
 */
export const createFile = defineScript<[number, number]>({
  name: 'createFile',
  keys: 4,
  lua: `
local used = tonumber(redis.call('GET', KEYS[1]) or '0')
local size = tonumber(ARGV[1])
if used + size > tonumber(ARGV[2]) then return {0, used} end
redis.call('SET', KEYS[2], ARGV[3])
redis.call('ZADD', KEYS[3], 0, ARGV[4])
redis.call('ZADD', KEYS[4], ARGV[5], ARGV[4])
return {1, redis.call('INCRBY', KEYS[1], size)}
`,
});
