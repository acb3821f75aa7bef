import { defineScript } from '../script-definition.js';

/**
 * Drops runs from a scope's running set that were found not running (dispatch/concurrency-gate.ts),
 * each only if it was not admitted again since it was read (its score unchanged).
 * KEYS: the running set. ARGV: flat pairs of run id, score as read. Returns how many went.
 */
export const dropStaleRuns = defineScript<number>({
  name: 'dropStaleRuns',
  keys: 1,
  lua: `
local dropped = 0
for i = 1, #ARGV, 2 do
  if redis.call('ZSCORE', KEYS[1], ARGV[i]) == ARGV[i + 1] then
    redis.call('ZREM', KEYS[1], ARGV[i])
    dropped = dropped + 1
  end
end
return dropped
`,
});
