import { defineScript } from '../script-definition.js';

/**
 * Removes the owner's file and gives its bytes back. KEYS: record, account index, expiry
 * index, byte count. ARGV: account id, file id. Returns the record's JSON, or nil when it is not the account's.
 */
export const deleteFile = defineScript<string | null>({
  name: 'deleteFile',
  keys: 4,
  lua: `
local doc = redis.call('GET', KEYS[1])
if not doc then return false end
local file = cjson.decode(doc)
if file.account_id ~= ARGV[1] then return false end
redis.call('DEL', KEYS[1])
redis.call('ZREM', KEYS[2], ARGV[2])
redis.call('ZREM', KEYS[3], ARGV[2])
local left = redis.call('DECRBY', KEYS[4], file.size)
if left <= 0 then redis.call('DEL', KEYS[4]) end
return doc
`,
});
