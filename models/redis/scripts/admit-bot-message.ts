import { defineScript } from '../script-definition.js';

/**
 * GCRA over several limiters at once, on Redis's clock: a bot message is admitted only if
 * every limiter has room, and only then does it count against all of them (a message refused
 * by its client's limit does not use up the bot's). KEYS: the limiters. ARGV: per key, the
 * emission interval and the burst tolerance (ms). Returns {0, 0} when admitted, else {wait ms,
 * index of the limiter that refused (1-based)}.
 */
export const admitBotMessage = defineScript<[number, number]>({
  name: 'admitBotMessage',
  keys: 'any',
  lua: `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local after = {}
for i, key in ipairs(KEYS) do
  local interval = tonumber(ARGV[2 * i - 1])
  local tat = math.max(tonumber(redis.call('GET', key) or now), now)
  local wait = tat + interval - tonumber(ARGV[2 * i]) - now
  if wait > 0 then return { math.ceil(wait), i } end
  after[i] = tat + interval
end
for i, key in ipairs(KEYS) do
  redis.call('SET', key, after[i], 'PX', math.ceil(after[i] - now) + 1000)
end
return { 0, 0 }
`,
});
