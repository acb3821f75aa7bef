import { LuaScript } from './lua-script.js';
import { PRIOR_FIELDS } from './run-codec.js';

/**
 * Lua scripts that keep a run, its account's credits and the run indexes consistent: each
 * runs atomically inside Redis, so a crash leaves either all of its writes or none. They
 * read only the run's plain scalar fields (see run-codec.ts), so no JSON is decoded here.
 * Index keys are derived from KEYS[3] (the account's run index) inside the scripts.
 */

const RETURN_RUN = `
local function run_reply(tag, key)
  local reply = { tag }
  for _, v in ipairs(redis.call('HGETALL', key)) do reply[#reply + 1] = v end
  return reply
end
`;

/**
 * KEYS: run, account, account run index, unconfirmed set.
 * ARGV: run_id, account_id, price, doc (JSON of the immutable fields), created ms,
 *       fair-share step, priority base, kind, index floor (ids below it are past retention).
 * Returns {'created', priority} | {'exists', HGETALL...} | {'insufficient', credits} | {'no_account'}.
 */
export const CREATE_RUN_LUA = `${RETURN_RUN}
if redis.call('EXISTS', KEYS[1]) == 1 then return run_reply('exists', KEYS[1]) end
local acct = redis.call('HMGET', KEYS[2], 'credits', 'in_flight')
if not acct[1] then return { 'no_account' } end
local price = tonumber(ARGV[3])
if tonumber(acct[1]) < price then return { 'insufficient', acct[1] } end
local priority = tonumber(ARGV[7]) + math.min(math.floor(tonumber(acct[2] or '0') / tonumber(ARGV[6])), 9)
redis.call('HINCRBY', KEYS[2], 'credits', -price)
redis.call('HINCRBY', KEYS[2], 'reserved', price)
redis.call('HINCRBY', KEYS[2], 'in_flight', 1)
redis.call('HSET', KEYS[1], 'doc', ARGV[4], 'account_id', ARGV[2], 'price', ARGV[3], 'status', 'queued',
  'settlement', 'reserved', 'priority', priority, 'attempts', 0, 'fence', 0)
local floor = '(' .. ARGV[9]
redis.call('ZADD', KEYS[3], 0, ARGV[1])
redis.call('ZREMRANGEBYLEX', KEYS[3], '-', floor)
redis.call('ZADD', KEYS[3] .. ':s:queued', 0, ARGV[1])
redis.call('ZADD', KEYS[3] .. ':k:' .. ARGV[8], 0, ARGV[1])
redis.call('ZREMRANGEBYLEX', KEYS[3] .. ':k:' .. ARGV[8], '-', floor)
redis.call('ZADD', KEYS[4], ARGV[5], ARGV[1])
return { 'created', tostring(priority) }
`;
// The source is exported so the submission can run this very create behind its request gate
// in one script (gated-create.ts).
export const CREATE_RUN = new LuaScript(CREATE_RUN_LUA);

/**
 * KEYS: run, account, account run index, unconfirmed set.
 * ARGV: allowed statuses (",a,b,"), new status or '', retention seconds, index floor, run_id,
 *       account_id, required fence or '', reply ('none': no record on success), '1' to report
 *       the prior fields, n, then n flat pairs to set, then flat pairs to set only where absent.
 * Returns {'ok', [prior fields], [HGETALL...]} | {'refused', HGETALL...} | {'missing'}. The prior
 * fields, when asked for, are PRIOR_FIELDS (run-codec.ts) in that order, '' for absent.
 */
export const TRANSITION_RUN = new LuaScript(`${RETURN_RUN}
local cur = redis.call('HMGET', KEYS[1], 'status', 'account_id', 'price', 'settlement', 'fence')
if not cur[1] or cur[2] ~= ARGV[6] then return { 'missing' } end
local status = cur[1]
if not string.find(ARGV[1], ',' .. status .. ',', 1, true) then return run_reply('refused', KEYS[1]) end
if ARGV[7] ~= '' and (cur[5] or '0') ~= ARGV[7] then return run_reply('refused', KEYS[1]) end
local reply = { 'ok' }
if ARGV[9] == '1' then
  local prior = redis.call('HMGET', KEYS[1], ${PRIOR_FIELDS.map((f) => `'${f}'`).join(', ')})
  for i = 1, ${PRIOR_FIELDS.length} do reply[#reply + 1] = prior[i] or '' end
end
local to = ARGV[2]
local flat = {}
local last_set = 10 + tonumber(ARGV[10])
-- Absent: no field, a null scalar ('') or a null JSON value. Written before the set pairs, which win a field named in both.
for i = last_set + 1, #ARGV, 2 do
  local v = redis.call('HGET', KEYS[1], ARGV[i])
  if not v or v == '' or v == 'null' then flat[#flat + 1] = ARGV[i]; flat[#flat + 1] = ARGV[i + 1] end
end
for i = 11, last_set do flat[#flat + 1] = ARGV[i] end
local terminal = { succeeded = true, failed = true, canceled = true }
if to ~= '' and to ~= status then
  flat[#flat + 1] = 'status'; flat[#flat + 1] = to
  redis.call('ZREM', KEYS[3] .. ':s:' .. status, ARGV[5])
  redis.call('ZADD', KEYS[3] .. ':s:' .. to, 0, ARGV[5])
  if terminal[to] then
    if cur[4] == 'reserved' then
      local price = tonumber(cur[3])
      redis.call('HINCRBY', KEYS[2], 'reserved', -price)
      if to == 'succeeded' then
        flat[#flat + 1] = 'settlement'; flat[#flat + 1] = 'charged'
      else
        redis.call('HINCRBY', KEYS[2], 'credits', price)
        flat[#flat + 1] = 'settlement'; flat[#flat + 1] = 'released'
      end
      redis.call('HINCRBY', KEYS[2], 'in_flight', -1)
    end
    redis.call('ZREM', KEYS[4], ARGV[5])
    redis.call('ZREMRANGEBYLEX', KEYS[3] .. ':s:' .. to, '-', '(' .. ARGV[4])
  end
end
if #flat > 0 then redis.call('HSET', KEYS[1], unpack(flat)) end
if to ~= '' and terminal[to] then redis.call('EXPIRE', KEYS[1], tonumber(ARGV[3])) end
if ARGV[8] ~= 'none' then
  for _, v in ipairs(redis.call('HGETALL', KEYS[1])) do reply[#reply + 1] = v end
end
return reply
`);

/** KEYS: claim key. ARGV: run_id expected. Deletes the claim only if it still names run_id. */
export const RELEASE_CLAIM = new LuaScript(`
local v = redis.call('GET', KEYS[1])
if v and cjson.decode(v).run_id == ARGV[1] then redis.call('DEL', KEYS[1]) end
return 0
`);
