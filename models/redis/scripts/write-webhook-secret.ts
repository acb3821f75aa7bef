import { defineScript } from '../script-definition.js';

/**
 * Sets an account's webhook secret: one JSON field, so the secret and its creation time are set
 * together. KEYS: the account. ARGV: the secret's JSON, '1' to replace it (otherwise it is set
 * only if absent, HSETNX). Returns the secret stored, or nil when there is no such account.
 */
export const writeWebhookSecret = defineScript<string | null>({
  name: 'writeWebhookSecret',
  keys: 1,
  lua: `
if redis.call('HEXISTS', KEYS[1], 'id') == 0 then return false end
if ARGV[2] == '1' then redis.call('HSET', KEYS[1], 'webhook_secret', ARGV[1])
else redis.call('HSETNX', KEYS[1], 'webhook_secret', ARGV[1]) end
return redis.call('HGET', KEYS[1], 'webhook_secret')
`,
});
