import { defineScript } from '../script-definition.js';

/** Deletes an idempotency claim only if it still names run_id. KEYS: claim key. ARGV: run_id expected. */
export const releaseClaim = defineScript<number>({
  name: 'releaseClaim',
  keys: 1,
  lua: `
local v = redis.call('GET', KEYS[1])
if v and cjson.decode(v).run_id == ARGV[1] then redis.call('DEL', KEYS[1]) end
return 0
`,
});
