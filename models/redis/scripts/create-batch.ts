import { defineScript } from '../script-definition.js';
import { createRunFunction } from './includes/create-run.js';

/** Arguments per run in createBatch's ARGV. */
export const CREATE_BATCH_RUN_ARGS = 8;

/** createBatch's ARGV before the first run's. */
export const CREATE_BATCH_FIXED_ARGS = 8;

/**
 * A batch and all of its runs in one atomic step (docs/jobs.md, "Batches"): the total price
 * reserved and every run created, indexed and marked unconfirmed, or nothing at all. Each run
 * is made by `create_run` (includes/create-run.ts), the single create's own code, so the two
 * can never drift apart: it reads the script's KEYS and ARGV, which are set to each run's in
 * turn (the batch's own are copied first). Every check is made before the first write, as a
 * script that stops halfway keeps what it wrote.
 * KEYS: account, account run index, unconfirmed set, batch record, batch run index, the claim of
 *       the batch's Idempotency-Key (the batch record's key again when it has none), then each run's key.
 * ARGV: batch_id, account_id, total price, created ms, fair-share step, index floor, the batch
 *       record (JSON), '1' when the batch carries an Idempotency-Key (else ''), then per run: run_id, price, doc, priority base, kind, view fragment,
 *       period, rate (create_run's ARGV[11] and [12]).
 * Returns {'created', the last run's kind's runs in flight, priority...} | {'exists', batch JSON} |
 * {'insufficient', credits} | {'budget', budget, spent, reserved} (the account's monthly budget,
 * judged on the total as create_run judges one run's price) | {'no_account'} | {'claim_lost'}
 * (the key's claim no longer names the batch: as createClaimedRun, create-claimed-run.ts).
 */
export const createBatch = defineScript<[string, ...string[]]>({
  name: 'createBatch',
  keys: 'any',
  lua: `${createRunFunction}
local K, A = {}, {}
for i = 1, #KEYS do K[i] = KEYS[i] end
for i = 1, #ARGV do A[i] = ARGV[i] end
local existing = redis.call('HGET', K[4], 'doc')
if existing then return { 'exists', existing } end
if A[8] == '1' then
  local claim = redis.call('GET', K[6])
  if not claim or cjson.decode(claim).run_id ~= A[1] then return { 'claim_lost' } end
end
local credits = redis.call('HGET', K[1], 'credits')
if not credits then return { 'no_account' } end
if tonumber(credits) < tonumber(A[3]) then return { 'insufficient', credits } end
local acct = redis.call('HMGET', K[1], 'budget', 'spent', 'spent_period', 'reserved')
if acct[1] and acct[1] ~= '' and #K > 6 then
  local spent = acct[3] == A[8 + 7] and tonumber(acct[2] or '0') or 0
  local held = tonumber(acct[4] or '0')
  if spent + held + tonumber(A[3]) > tonumber(acct[1]) then return { 'budget', acct[1], tostring(spent), tostring(held) } end
end
for i = 7, #K do
  if redis.call('EXISTS', K[i]) == 1 then return redis.error_reply('ERR a run id of the batch is taken') end
end
local reply = { 'created', '0' }
local n = #K - 6
for r = 1, n do
  local a = 8 + (r - 1) * ${CREATE_BATCH_RUN_ARGS}
  KEYS[1], KEYS[2], KEYS[3], KEYS[4] = K[6 + r], K[1], K[2], K[3]
  ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5] = A[a + 1], A[2], A[a + 2], A[a + 3], A[4]
  ARGV[6], ARGV[7], ARGV[8], ARGV[9], ARGV[10] = A[5], A[a + 4], A[a + 5], A[6], A[a + 6]
  ARGV[11], ARGV[12] = A[a + 7], A[a + 8]
  local created = create_run()
  if created[1] ~= 'created' then return redis.error_reply('ERR the create of a batch run answered ' .. created[1]) end
  reply[#reply + 1] = created[2]
  reply[2] = created[3]
  redis.call('ZADD', K[5], 0, A[a + 1])
end
redis.call('HSET', K[4], 'doc', A[7], 'account_id', A[2])
return reply
`,
});
