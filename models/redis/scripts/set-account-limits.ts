import { defineScript } from '../script-definition.js';

/**
 * Writes an account's limits (docs/jobs.md, "Limits and fairness"), each only when given.
 * KEYS: the account. ARGV: weight or '', max_running or '' ('0': the default again), a JSON
 * object of kind -> limit (null: removed) to merge into `max_running_by_kind`, or ''.
 * Returns 1, or 0 for no such account.
 */
export const setAccountLimits = defineScript<number>({
  name: 'setAccountLimits',
  keys: 1,
  lua: `
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
if ARGV[1] ~= '' then redis.call('HSET', KEYS[1], 'weight', ARGV[1]) end
if ARGV[2] == '0' then redis.call('HDEL', KEYS[1], 'max_running') elseif ARGV[2] ~= '' then redis.call('HSET', KEYS[1], 'max_running', ARGV[2]) end
if ARGV[3] ~= '' then
  local cur = redis.call('HGET', KEYS[1], 'max_running_by_kind')
  local by_kind = cur and cjson.decode(cur) or {}
  for kind, limit in pairs(cjson.decode(ARGV[3])) do
    if limit == cjson.null then by_kind[kind] = nil else by_kind[kind] = limit end
  end
  if next(by_kind) == nil then redis.call('HDEL', KEYS[1], 'max_running_by_kind')
  else redis.call('HSET', KEYS[1], 'max_running_by_kind', cjson.encode(by_kind)) end
end
return 1
`,
});
