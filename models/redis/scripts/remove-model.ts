import { defineScript } from '../script-definition.js';

/**
 * Removes a model, and its kind from the set with the kind's last model, atomically with a
 * concurrent advertisement. KEYS: the set of kinds, the kind's hash. ARGV: id, kind. Returns 1 if removed.
 */
export const removeModel = defineScript<number>({
  name: 'removeModel',
  keys: 2,
  lua: `
local n = redis.call('HDEL', KEYS[2], ARGV[1])
if redis.call('HLEN', KEYS[2]) == 0 then redis.call('SREM', KEYS[1], ARGV[2]) end
return n
`,
});
