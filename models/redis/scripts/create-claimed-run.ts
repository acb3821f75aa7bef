import { defineScript } from '../script-definition.js';
import { createRunFunction } from './includes/create-run.js';

/**
 * createRun for a run submitted with an Idempotency-Key: the run is made only while the key's
 * claim still names it. A request that read the claim (a retry) may create the run the
 * claimer has not made yet; if the claimer failed meanwhile and released the key (and another
 * request claimed it afresh), this create must not make a second run under the same key.
 * releaseClaim keeps a claim whose run exists, so the two exclude each other.
 * KEYS: createRun's four, then the claim key. ARGV: createRun's. Reply: createRun's, or {'claim_lost'}.
 */
export const createClaimedRun = defineScript<[string, ...string[]]>({
  name: 'createClaimedRun',
  keys: 5,
  lua: `${createRunFunction}
if redis.call('EXISTS', KEYS[1]) == 0 then
  local claim = redis.call('GET', KEYS[5])
  if not claim or cjson.decode(claim).run_id ~= ARGV[1] then return { 'claim_lost' } end
end
return create_run()
`,
});
