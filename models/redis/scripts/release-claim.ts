import { defineScript } from '../script-definition.js';

/**
 * Deletes an idempotency claim only if it still names run_id and no record of that id exists:
 * a run (or batch) made under the claim, by any request carrying the key, keeps it, so a later
 * request can never claim the key afresh and make a second one. The creates check the claim in
 * their own scripts (create-claimed-run.ts, create-batch.ts), so the two steps exclude each other.
 * KEYS: claim key, the run's key, the batch's key (an id names one or the other). ARGV: run_id expected.
 */
export const releaseClaim = defineScript<number>({
  name: 'releaseClaim',
  keys: 3,
  lua: `
local v = redis.call('GET', KEYS[1])
if not v or cjson.decode(v).run_id ~= ARGV[1] then return 0 end
if redis.call('EXISTS', KEYS[2]) == 1 or redis.call('EXISTS', KEYS[3]) == 1 then return 0 end
redis.call('DEL', KEYS[1])
return 1
`,
});
