import { RANK_CAP } from '../../../fair-share.js';
import { runReply } from './run-reply.js';

/**
 * `create_run()`: a run's create, shared by createRun and gatedCreateRun so the two can never
 * drift apart. It reads the calling script's own KEYS and ARGV, which must start with these:
 * KEYS: run, account, account run index, unconfirmed set.
 * ARGV: run_id, account_id, price, doc (JSON of the immutable fields), created ms,
 *       fair-share step, priority base, kind, index floor (ids below it are past retention),
 *       the job view's immutable fields as a JSON fragment (`vw`: what transitionRun's status
 *       events are built from, so it never decodes `doc`), the period (`YYYY-MM` of created),
 *       the run's per-unit rate as JSON or '' (stored as `rate` for transitionRun's charge).
 * The priority is the class's band plus the job's fair-share rank (models/fair-share.ts):
 * floor(the account's runs of this kind in flight before it / (step × the account's `weight`)).
 * Returns {'created', priority, kind in flight, share} (the account's runs of this kind in
 * flight with this one, and step × weight: what a gateway guesses the next one's rank from,
 * queues/create-forecast.ts) | {'exists', HGETALL...} | {'insufficient', credits} |
 * {'budget', budget, spent, reserved} | {'no_account'}.
 * Budget: an account with `budget` refuses a run whose price would take what it spent in the
 * period (`spent`, when `spent_period` is this one; else 0) plus what it holds reserved past it.
 * Index keys are derived from KEYS[3] (the account's run index): the run goes into the index,
 * its `:s:queued`, `:k:<kind>` and `:sk:queued:<kind>`, so a listing by any filter reads only
 * its matches (models/redis/keys.ts). `kind` is also stored as a plain field for transitionRun,
 * which moves the run between the `:sk:` indexes without decoding `doc`.
 */
export const createRunFunction = `${runReply}
local function create_run()
  if redis.call('EXISTS', KEYS[1]) == 1 then return run_reply('exists', KEYS[1]) end
  local kind_field = 'in_flight:' .. ARGV[8]
  local acct = redis.call('HMGET', KEYS[2], 'credits', kind_field, 'weight', 'budget', 'spent', 'spent_period', 'reserved')
  if not acct[1] then return { 'no_account' } end
  local price = tonumber(ARGV[3])
  if tonumber(acct[1]) < price then return { 'insufficient', acct[1] } end
  if acct[4] and acct[4] ~= '' then
    local spent = acct[6] == ARGV[11] and tonumber(acct[5] or '0') or 0
    local held = tonumber(acct[7] or '0')
    if spent + held + price > tonumber(acct[4]) then return { 'budget', acct[4], tostring(spent), tostring(held) } end
  end
  local of_kind = math.max(0, tonumber(acct[2] or '0'))
  local share = tonumber(ARGV[6]) * math.max(1, tonumber(acct[3] or '1'))
  local priority = tonumber(ARGV[7]) + math.min(math.floor(of_kind / share), ${RANK_CAP})
  redis.call('HINCRBY', KEYS[2], 'credits', -price)
  redis.call('HINCRBY', KEYS[2], 'reserved', price)
  redis.call('HINCRBY', KEYS[2], 'in_flight', 1)
  redis.call('HINCRBY', KEYS[2], kind_field, 1)
  redis.call('HSET', KEYS[1], 'doc', ARGV[4], 'account_id', ARGV[2], 'price', ARGV[3], 'status', 'queued',
    'settlement', 'reserved', 'priority', priority, 'attempts', 0, 'fence', 0, 'vw', ARGV[10], 'kind', ARGV[8])
  if ARGV[12] ~= '' then redis.call('HSET', KEYS[1], 'rate', ARGV[12]) end
  local floor = '(' .. ARGV[9]
  redis.call('ZADD', KEYS[3], 0, ARGV[1])
  redis.call('ZREMRANGEBYLEX', KEYS[3], '-', floor)
  redis.call('ZADD', KEYS[3] .. ':s:queued', 0, ARGV[1])
  redis.call('ZADD', KEYS[3] .. ':k:' .. ARGV[8], 0, ARGV[1])
  redis.call('ZREMRANGEBYLEX', KEYS[3] .. ':k:' .. ARGV[8], '-', floor)
  redis.call('ZADD', KEYS[3] .. ':sk:queued:' .. ARGV[8], 0, ARGV[1])
  redis.call('ZADD', KEYS[4], ARGV[5], ARGV[1])
  return { 'created', tostring(priority), tostring(of_kind + 1), tostring(share) }
end
`;
