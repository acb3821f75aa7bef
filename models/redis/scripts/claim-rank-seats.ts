import { defineScript } from '../script-definition.js';

/**
 * Claims one free seat of each named rank worker, all or none: the gang lease of a pipeline
 * (docs/ranks.md, "Gang leasing"). A seat is `free expires-ms rest...`; a worker whose seat is
 * gone, expired or has no free slot fails the whole claim, and nothing is taken.
 * KEYS: the model's seats. ARGV: now (ms), then the worker ids. Returns 1 if claimed, else 0.
 */
export const claimRankSeats = defineScript<number>({
  name: 'claimRankSeats',
  keys: 1,
  lua: `
local now = tonumber(ARGV[1])
local seats = {}
for i = 2, #ARGV do
  local raw = redis.call('HGET', KEYS[1], ARGV[i])
  if not raw then return 0 end
  local free, expires, rest = string.match(raw, '^(%d+) (%d+) (.*)$')
  if not free or tonumber(free) < 1 or tonumber(expires) < now then return 0 end
  seats[#seats + 1] = { ARGV[i], tonumber(free) - 1, expires, rest }
end
for _, s in ipairs(seats) do
  redis.call('HSET', KEYS[1], s[1], s[2] .. ' ' .. s[3] .. ' ' .. s[4])
end
return 1
`,
});
