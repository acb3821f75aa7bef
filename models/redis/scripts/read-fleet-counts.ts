import { defineScript } from '../script-definition.js';

/**
 * An instance's fleet counts, less the shares of its workers that registered again elsewhere,
 * in one atomic read: `{total, share...}`, or nil once the instance's record expired.
 * KEYS: counts hash, retired set.
 */
export const readFleetCounts = defineScript<string[] | null>({
  name: 'readFleetCounts',
  keys: 2,
  lua: `
local total = redis.call('HGET', KEYS[1], 'total')
if not total then return false end
local out = { total }
for _, w in ipairs(redis.call('SMEMBERS', KEYS[2])) do
  local share = redis.call('HGET', KEYS[1], 's:' .. w)
  if share then out[#out + 1] = share end
end
return out
`,
});
