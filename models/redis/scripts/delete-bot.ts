import { defineScript } from '../script-definition.js';

/**
 * Deletes a bot, its index entry and its flow, only if the bot is still the account's and still
 * names that flow: the caller read the flow id first, and a concurrent delete makes this a no-op.
 * KEYS: bot, account's bots, flow. ARGV: account id, bot id, flow id. Returns the bot's JSON or nil.
 */
export const deleteBot = defineScript<string | null>({
  name: 'deleteBot',
  keys: 3,
  lua: `
local h = redis.call('HMGET', KEYS[1], 'account_id', 'flow_id', 'doc')
if h[1] ~= ARGV[1] or h[2] ~= ARGV[3] then return false end
redis.call('DEL', KEYS[1], KEYS[3])
redis.call('ZREM', KEYS[2], ARGV[2])
return h[3]
`,
});
