import { defineScript } from '../script-definition.js';

/**
 * Marks the worker an instance counts under an identity as retired (it registered again
 * elsewhere): readers take its share off that instance's counts until the instance, if alive,
 * lets the old connection go; a dead one's record just expires. The set lives as long as the
 * counts. KEYS: counts hash, retired set. ARGV: identity field, fallback TTL. Returns the worker id.
 */
export const retireFleetWorker = defineScript<string | null>({
  name: 'retireFleetWorker',
  keys: 2,
  lua: `
local w = redis.call('HGET', KEYS[1], ARGV[1])
if not w then return false end
redis.call('SADD', KEYS[2], w)
local ttl = redis.call('PTTL', KEYS[1])
redis.call('PEXPIRE', KEYS[2], ttl > 0 and ttl or tonumber(ARGV[2]))
return w
`,
});
