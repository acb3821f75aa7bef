import { defineScript } from '../script-definition.js';

/**
 * A run left `running` (dispatch/concurrency-gate.ts): taken out of each scope's running set,
 * and for each scope that it freed a slot in (or every scope, with ARGV[2] '1': slots freed
 * otherwise), the first of its parked runs taken out to be put back in its queue.
 * KEYS: the parked-runs hash, then per scope its running set and its parked set.
 * ARGV: run id ('' : none), '1' to unpark one per scope whatever was released, the score the
 *       run was admitted with ('' : any), so that a lease lost here while its run was admitted
 *       again by another lease (a newer score) leaves that lease's slot be.
 * Returns the unparked runs as flat pairs: run id, queue.
 */
export const releaseRun = defineScript<string[]>({
  name: 'releaseRun',
  keys: 'any',
  lua: `
local out = {}
for i = 1, (#KEYS - 1) / 2 do
  local freed = ARGV[1] ~= '' and (not ARGV[3] or ARGV[3] == '' or redis.call('ZSCORE', KEYS[2 * i], ARGV[1]) == ARGV[3])
    and redis.call('ZREM', KEYS[2 * i], ARGV[1]) == 1
  if freed or ARGV[2] == '1' then
    local first = redis.call('ZPOPMIN', KEYS[2 * i + 1])
    if first[1] then
      local was = redis.call('HGET', KEYS[1], first[1])
      redis.call('HDEL', KEYS[1], first[1])
      if was then
        out[#out + 1] = first[1]
        out[#out + 1] = string.match(was, '\\n(.*)$')
      end
    end
  end
end
return out
`,
});
