import { defineScript } from '../script-definition.js';

/**
 * Gives back seats claimed for a pipeline that was not formed (no job, or a rank refused): one
 * free slot more on each named worker's seat that still exists. The worker's own instance
 * rewrites the seat from its real state at its next change or refresh anyway; this makes the
 * seat usable again before then.
 * KEYS: the model's seats. ARGV: the worker ids. Returns how many seats it gave back.
 */
export const releaseRankSeats = defineScript<number>({
  name: 'releaseRankSeats',
  keys: 1,
  lua: `
local n = 0
for i = 1, #ARGV do
  local raw = redis.call('HGET', KEYS[1], ARGV[i])
  if raw then
    local free, rest = string.match(raw, '^(%d+) (.*)$')
    if free then
      redis.call('HSET', KEYS[1], ARGV[i], (tonumber(free) + 1) .. ' ' .. rest)
      n = n + 1
    end
  end
end
return n
`,
});
