import { defineScript } from '../script-definition.js';

/**
 * Deletes only the owner's tool, and frees its name only if the index still points at this
 * tool. KEYS: the tool, the account's name index. ARGV: account id, tool id. Returns the
 * tool's JSON, or nil when it is not the account's.
 */
export const deleteTool = defineScript<string | null>({
  name: 'deleteTool',
  keys: 2,
  lua: `
if redis.call('HGET', KEYS[1], 'account_id') ~= ARGV[1] then return false end
local fields = redis.call('HMGET', KEYS[1], 'name', 'doc')
redis.call('DEL', KEYS[1])
if redis.call('HGET', KEYS[2], fields[1]) == ARGV[2] then redis.call('HDEL', KEYS[2], fields[1]) end
return fields[2]
`,
});
