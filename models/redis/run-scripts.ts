/**
 * Lua scripts that keep a run, its account's credits and the run indexes consistent: each
 * runs atomically inside Redis, so a crash leaves either all of its writes or none.
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
 * ARGV: run_id, price, fields (JSON object of field -> JSON text), created ms, fair-share step,
 *       priority base, kind, index floor (ids below it are past retention).
 */
export const CREATE_RUN = `${RETURN_RUN}
if redis.call('EXISTS', KEYS[1]) == 1 then return run_reply('exists', KEYS[1]) end
local acct = redis.call('HMGET', KEYS[2], 'credits', 'in_flight')
if not acct[1] then return { 'no_account' } end
local credits = tonumber(acct[1])
local price = tonumber(ARGV[2])
if credits < price then return { 'insufficient', tostring(credits) } end
local in_flight = tonumber(acct[2] or '0')
local priority = tonumber(ARGV[6]) + math.min(math.floor(in_flight / tonumber(ARGV[5])), 9)
redis.call('HINCRBY', KEYS[2], 'credits', -price)
redis.call('HINCRBY', KEYS[2], 'reserved', price)
redis.call('HINCRBY', KEYS[2], 'in_flight', 1)
local fields = cjson.decode(ARGV[3])
fields['priority'] = tostring(priority)
fields['settlement'] = '"reserved"'
fields['status'] = '"queued"'
local flat = {}
for k, v in pairs(fields) do flat[#flat + 1] = k; flat[#flat + 1] = v end
redis.call('HSET', KEYS[1], unpack(flat))
local floor = '(' .. ARGV[8]
redis.call('ZADD', KEYS[3], 0, ARGV[1])
redis.call('ZREMRANGEBYLEX', KEYS[3], '-', floor)
redis.call('ZADD', KEYS[3] .. ':s:queued', 0, ARGV[1])
redis.call('ZADD', KEYS[3] .. ':k:' .. ARGV[7], 0, ARGV[1])
redis.call('ZREMRANGEBYLEX', KEYS[3] .. ':k:' .. ARGV[7], '-', floor)
redis.call('ZADD', KEYS[4], ARGV[4], ARGV[1])
return run_reply('created', KEYS[1])
`;

/**
 * KEYS: run, account, account run index, unconfirmed set.
 * ARGV: allowed statuses (JSON array), new status or '', fields to set (JSON object of
 *       field -> JSON text), retention seconds, index floor, run_id, account_id.
 */
export const TRANSITION_RUN = `${RETURN_RUN}
local cur = redis.call('HMGET', KEYS[1], 'status', 'account_id', 'price', 'settlement')
if not cur[1] or cjson.decode(cur[2]) ~= ARGV[7] then return { 'missing' } end
local status = cjson.decode(cur[1])
local allowed = false
for _, s in ipairs(cjson.decode(ARGV[1])) do if s == status then allowed = true end end
if not allowed then return run_reply('refused', KEYS[1]) end
local to = ARGV[2]
local flat = {}
for k, v in pairs(cjson.decode(ARGV[3])) do flat[#flat + 1] = k; flat[#flat + 1] = v end
local terminal = { succeeded = true, failed = true, canceled = true }
if to ~= '' and to ~= status then
  flat[#flat + 1] = 'status'; flat[#flat + 1] = cjson.encode(to)
  redis.call('ZREM', KEYS[3] .. ':s:' .. status, ARGV[6])
  redis.call('ZADD', KEYS[3] .. ':s:' .. to, 0, ARGV[6])
  if terminal[to] then
    if cjson.decode(cur[4]) == 'reserved' then
      local price = cjson.decode(cur[3])
      redis.call('HINCRBY', KEYS[2], 'reserved', -price)
      if to == 'succeeded' then
        flat[#flat + 1] = 'settlement'; flat[#flat + 1] = '"charged"'
      else
        redis.call('HINCRBY', KEYS[2], 'credits', price)
        flat[#flat + 1] = 'settlement'; flat[#flat + 1] = '"released"'
      end
      redis.call('HINCRBY', KEYS[2], 'in_flight', -1)
    end
    redis.call('ZREM', KEYS[4], ARGV[6])
    redis.call('ZREMRANGEBYLEX', KEYS[3] .. ':s:' .. to, '-', '(' .. ARGV[5])
  end
end
if #flat > 0 then redis.call('HSET', KEYS[1], unpack(flat)) end
if to ~= '' and terminal[to] then redis.call('EXPIRE', KEYS[1], tonumber(ARGV[4])) end
return run_reply('ok', KEYS[1])
`;

/** KEYS: claim key. ARGV: run_id expected. Deletes the claim only if it still names run_id. */
export const RELEASE_CLAIM = `
local v = redis.call('GET', KEYS[1])
if v and cjson.decode(v).run_id == ARGV[1] then redis.call('DEL', KEYS[1]) end
return 0
`;
