import { defineScript } from '../script-definition.js';

/**
 * Fills one chunk of an account's status-and-kind index (`:sk:<status>:<kind>`) from its status
 * and kind indexes, which gateways before the `:sk:` indexes kept alone (models/redis/keys.ts):
 * walks the smaller of the two from the cursor down and adds each run also in the other. Run
 * before the first read of that index (RedisRunStore.list), chunk after chunk until it answers
 * '', when it also marks the index built so no gateway walks it again. Each chunk reads both
 * indexes at one instant, and createRun and transitionRun keep the `:sk:` index themselves
 * between chunks, so what it adds was a match when added, and a run that moves later is
 * moved by its transition.
 * KEYS: the status index, the kind index, the status-and-kind index, the built marks (a hash).
 * ARGV: the marker field (`<status>:<kind>`), the cursor (a run id: runs below it; '' for the
 *       newest), the chunk size.
 * Returns the cursor of the next chunk (the last run id it read), or '' when it was the last.
 * With either index empty there is nothing to fill and it marks nothing (a listing may name a
 * kind no run has: its marks would pile up); the next listing asks again.
 */
export const buildRunIndex = defineScript<string>({
  name: 'buildRunIndex',
  keys: 4,
  lua: `
local walked, other = KEYS[1], KEYS[2]
local walked_count, other_count = redis.call('ZCARD', walked), redis.call('ZCARD', other)
-- Nothing to fill, and no mark either: a listing may name any kind, and marks of made-up ones would pile up.
if walked_count == 0 or other_count == 0 then return '' end
if other_count < walked_count then walked, other = other, walked end
local chunk = tonumber(ARGV[3])
local ids = redis.call('ZRANGE', walked, ARGV[2] == '' and '+' or '(' .. ARGV[2], '-', 'BYLEX', 'REV', 'LIMIT', 0, chunk)
for _, id in ipairs(ids) do
  if redis.call('ZSCORE', other, id) then redis.call('ZADD', KEYS[3], 0, id) end
end
if #ids < chunk then
  redis.call('HSET', KEYS[4], ARGV[1], '1')
  return ''
end
return ids[#ids]
`,
});
