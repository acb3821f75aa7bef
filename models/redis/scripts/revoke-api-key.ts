import { defineScript } from '../script-definition.js';

/**
 * Marks an API key revoked if it is the account's; revoking twice keeps the first time.
 * KEYS: the key's record. ARGV: account id, revoked at. Returns 1, or 0 when it is not the account's.
 */
export const revokeApiKey = defineScript<number>({
  name: 'revokeApiKey',
  keys: 1,
  lua: `
if redis.call('HGET', KEYS[1], 'account_id') ~= ARGV[1] then return 0 end
redis.call('HSETNX', KEYS[1], 'revoked_at', ARGV[2])
return 1
`,
});
