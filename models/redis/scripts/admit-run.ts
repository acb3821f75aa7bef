import { defineScript } from '../script-definition.js';

/**
 * The concurrency gate (dispatch/concurrency-gate.ts): admits a fetched run if every limited
 * scope it counts against (its account, API key, account and kind) has a free slot, in one
 * step, or parks it under the first that has none. A run already counted in a scope is
 * admitted there again (a re-lease after its gateway died holds the slot it had).
 * KEYS: the parked-runs hash, then per scope its running set (run id -> admitted ms) and its
 *       parked set (run id -> priority).
 * ARGV: run id, now ms, queue, priority, then each scope's limit.
 * Returns 0 admitted, or the 1-based index of the scope it was parked under.
 */
export const admitRun = defineScript<number>({
  name: 'admitRun',
  keys: 'any',
  lua: `
local run = ARGV[1]
local n = (#KEYS - 1) / 2
for i = 1, n do
  local running = KEYS[2 * i]
  if not redis.call('ZSCORE', running, run) and redis.call('ZCARD', running) >= tonumber(ARGV[4 + i]) then
    local was = redis.call('HGET', KEYS[1], run)
    if was then redis.call('ZREM', string.match(was, '^[^\\n]*'), run) end
    redis.call('ZADD', KEYS[2 * i + 1], ARGV[4], run)
    redis.call('HSET', KEYS[1], run, KEYS[2 * i + 1] .. '\\n' .. ARGV[3])
    return i
  end
end
for i = 1, n do redis.call('ZADD', KEYS[2 * i], ARGV[2], run) end
local was = redis.call('HGET', KEYS[1], run)
if was then
  redis.call('ZREM', string.match(was, '^[^\\n]*'), run)
  redis.call('HDEL', KEYS[1], run)
end
return 0
`,
});
