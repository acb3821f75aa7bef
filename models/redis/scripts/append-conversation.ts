import { defineScript } from '../script-definition.js';

/**
 * Appends to a bot conversation that still exists, trims it to the last ARGV[1] messages and
 * gives both keys a fresh lifetime of ARGV[2] seconds. KEYS: conversation, its messages.
 * ARGV: keep, ttl seconds, messages (JSON) ... Returns 1, or 0 when the conversation is gone.
 */
export const appendConversation = defineScript<number>({
  name: 'appendConversation',
  keys: 2,
  lua: `
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('RPUSH', KEYS[2], unpack(ARGV, 3))
redis.call('LTRIM', KEYS[2], -tonumber(ARGV[1]), -1)
redis.call('EXPIRE', KEYS[1], ARGV[2])
redis.call('EXPIRE', KEYS[2], ARGV[2])
return 1
`,
});
