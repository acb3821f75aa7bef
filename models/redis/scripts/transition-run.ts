import { PRIOR_FIELDS } from '../run-codec.js';
import { defineScript } from '../script-definition.js';
import { appendEventsFunction } from './includes/append-events.js';
import { runReply } from './includes/run-reply.js';
import { unitCostFunction } from './includes/unit-cost.js';

/**
 * A run's compare-and-set on its status, settling its reservation when it becomes terminal
 * (on success `charged`: the cost of the `usage` set with it at the run's `rate`, at most its
 * price, the rest returned; counted in the account's `spent` of the month of `finished_at`;
 * otherwise all released, `charged` 0) and moving it between the status indexes (`:s:`
 * and `:sk:`, models/redis/keys.ts). Reads only the run's plain scalar fields (run-codec.ts),
 * so no JSON is decoded here, except a succeeded run's `rate` and `usage` (two small objects,
 * and only for a per-unit price), and once for a run made before `kind` was one of them: its
 * kind is read from `doc` and stored. Index keys are derived from KEYS[3] (the account's run
 * index).
 *
 * With an event channel, a status change is also logged in the same step: its `status` event
 * (and `done` after a terminal one), the job view built from the record's fields as stored
 * (the immutable part written at creation as `vw`, the JSON-text fields as they are), appended
 * by `append_events` as appendRunEvents would. A record without `vw` (made before it) is left
 * to the caller to log.
 * KEYS: run, account, account run index, unconfirmed set, the run's event stream, its counter.
 * ARGV: allowed statuses (",a,b,"), new status or '', retention seconds, index floor, run_id,
 *       account_id, required fence or '', reply ('none': no record on success), '1' to report
 *       the prior fields, n, event channel or '' (no logging), its publish command (PUBLISH or
 *       SPUBLISH, append_events), event log length, event ttl ms,
 *       an attempt entry's JSON or '' (merged into `attempt_history` as mergeAttempt does,
 *       models/attempt-history.ts), then n flat pairs to set, then flat pairs to set only where absent.
 * Returns {'ok', logged ('1' or ''), [prior fields], [HGETALL...]} | {'refused', HGETALL...} |
 * {'missing'}. The prior fields, when asked for, are PRIOR_FIELDS (run-codec.ts) in that order,
 * '' for absent.
 */
export const transitionRun = defineScript<[string, ...string[]]>({
  name: 'transitionRun',
  keys: 6,
  lua: `${runReply}${appendEventsFunction}${unitCostFunction}
local cur = redis.call('HMGET', KEYS[1], 'status', 'account_id', 'price', 'settlement', 'fence', 'kind', 'rate')
if not cur[1] or cur[2] ~= ARGV[6] then return { 'missing' } end
local status = cur[1]
if not string.find(ARGV[1], ',' .. status .. ',', 1, true) then return run_reply('refused', KEYS[1]) end
if ARGV[7] ~= '' and (cur[5] or '0') ~= ARGV[7] then return run_reply('refused', KEYS[1]) end
local reply = { 'ok', '' }
if ARGV[9] == '1' then
  local prior = redis.call('HMGET', KEYS[1], ${PRIOR_FIELDS.map((f) => `'${f}'`).join(', ')})
  for i = 1, ${PRIOR_FIELDS.length} do reply[#reply + 1] = prior[i] or '' end
end
local to = ARGV[2]
local flat = {}
local last_set = 15 + tonumber(ARGV[10])
-- Absent: no field, a null scalar ('') or a null JSON value. Written before the set pairs, which win a field named in both.
for i = last_set + 1, #ARGV, 2 do
  local v = redis.call('HGET', KEYS[1], ARGV[i])
  if not v or v == '' or v == 'null' then flat[#flat + 1] = ARGV[i]; flat[#flat + 1] = ARGV[i + 1] end
end
for i = 16, last_set do flat[#flat + 1] = ARGV[i] end
if ARGV[15] ~= '' then
  local w = cjson.decode(ARGV[15])
  local function null(v) return v == nil or v == cjson.null end
  local stored = redis.call('HGET', KEYS[1], 'attempt_history')
  local list = {}
  if stored and stored ~= '' and stored ~= 'null' then list = cjson.decode(stored) end
  local starting = not null(w.started_at) and null(w.ended_at)
  local out, placed = {}, false
  for _, e in ipairs(list) do
    if e.attempt == w.attempt then
      placed = true
      if not w.drop then
        for k, v in pairs(w) do e[k] = v end
        out[#out + 1] = e
      end
    else
      if starting and e.attempt < w.attempt and null(e.ended_at) then
        e.ended_at = w.started_at
        e.error = { code = 'worker_lost', message = 'the lease was lost with its gateway', retryable = true, attempt = e.attempt }
      end
      out[#out + 1] = e
    end
  end
  if not placed and not w.drop then
    local e = { worker = cjson.null, tier = cjson.null, started_at = cjson.null, ended_at = cjson.null, error = cjson.null }
    for k, v in pairs(w) do e[k] = v end
    out[#out + 1] = e
  end
  flat[#flat + 1] = 'attempt_history'; flat[#flat + 1] = #out == 0 and '[]' or cjson.encode(out)
end
local terminal = { succeeded = true, failed = true, canceled = true }
if to ~= '' and to ~= status then
  flat[#flat + 1] = 'status'; flat[#flat + 1] = to
  local kind = cur[6]
  if not kind then
    kind = cjson.decode(redis.call('HGET', KEYS[1], 'doc')).kind
    flat[#flat + 1] = 'kind'; flat[#flat + 1] = kind
  end
  local by_kind = ':' .. kind
  redis.call('ZREM', KEYS[3] .. ':s:' .. status, ARGV[5])
  redis.call('ZADD', KEYS[3] .. ':s:' .. to, 0, ARGV[5])
  redis.call('ZREM', KEYS[3] .. ':sk:' .. status .. by_kind, ARGV[5])
  redis.call('ZADD', KEYS[3] .. ':sk:' .. to .. by_kind, 0, ARGV[5])
  if terminal[to] then
    if cur[4] == 'reserved' then
      local price = tonumber(cur[3])
      local charge, usage, finished = 0, nil, nil
      for i = 1, #flat, 2 do
        if flat[i] == 'finished_at' then finished = string.match(flat[i + 1], '^"(%d%d%d%d%-%d%d)') end
        if flat[i] == 'usage' then usage = flat[i + 1] end
      end
      if to == 'succeeded' then charge = settle_charge(price, cur[7], usage) end
      redis.call('HINCRBY', KEYS[2], 'reserved', -price)
      if price > charge then redis.call('HINCRBY', KEYS[2], 'credits', price - charge) end
      if charge > 0 then
        local period = redis.call('HGET', KEYS[2], 'spent_period')
        if finished and (not period or finished > period) then redis.call('HSET', KEYS[2], 'spent', charge, 'spent_period', finished)
        else redis.call('HINCRBY', KEYS[2], 'spent', charge) end
      end
      flat[#flat + 1] = 'settlement'; flat[#flat + 1] = to == 'succeeded' and 'charged' or 'released'
      flat[#flat + 1] = 'charged'; flat[#flat + 1] = charge
      redis.call('HINCRBY', KEYS[2], 'in_flight', -1)
      -- The kind's count of the fair-share rank (create-run.ts); never below 0 for runs made before it.
      if tonumber(redis.call('HGET', KEYS[2], 'in_flight:' .. kind) or '0') > 0 then redis.call('HINCRBY', KEYS[2], 'in_flight:' .. kind, -1) end
    end
    redis.call('ZREM', KEYS[4], ARGV[5])
    redis.call('ZREMRANGEBYLEX', KEYS[3] .. ':s:' .. to, '-', '(' .. ARGV[4])
    redis.call('ZREMRANGEBYLEX', KEYS[3] .. ':sk:' .. to .. by_kind, '-', '(' .. ARGV[4])
  end
end
if #flat > 0 then redis.call('HSET', KEYS[1], unpack(flat)) end
if to ~= '' and terminal[to] then redis.call('EXPIRE', KEYS[1], tonumber(ARGV[3])) end
if ARGV[11] ~= '' and to ~= '' and to ~= status then
  local h = redis.call('HMGET', KEYS[1], 'vw', 'priority', 'started_at', 'finished_at', 'progress', 'attempts', 'output', 'error', 'attestation', 'timeout_at', 'attempt_history', 'price', 'charged', 'usage')
  if h[1] then
    local function j(v) if not v or v == '' then return 'null' end return v end
    local view = '{' .. h[1] .. ',"status":"' .. to .. '","terminal":' .. (terminal[to] and 'true' or 'false') ..
      ',"priority":' .. h[2] .. ',"started_at":' .. j(h[3]) .. ',"finished_at":' .. j(h[4]) .. ',"progress":' .. j(h[5]) ..
      ',"attempts":' .. (h[6] or '0') .. ',"timeout_at":' .. (to == 'running' and j(h[10]) or 'null') .. ',"queue_position":null,"waiting_reason":null,"waiting_ranks":null,"output":' .. j(h[7]) ..
      ',"error":' .. j(h[8]) .. ',"attestation":' .. j(h[9]) .. ',"attempt_history":' .. (h[11] or '[]') ..
      ',"cost":{"reserved":' .. (h[12] or '0') .. ',"charged":' .. j(h[13]) .. '},"usage":' .. j(h[14]) .. '}'
    local events = { { 'status', view, '', '' } }
    if terminal[to] then events[2] = { 'done', view, '', '' } end
    append_events(KEYS[5], KEYS[6], nil, ARGV[12], ARGV[11], ARGV[13], ARGV[14], events)
    reply[2] = '1'
  end
end
if ARGV[8] ~= 'none' then
  for _, v in ipairs(redis.call('HGETALL', KEYS[1])) do reply[#reply + 1] = v end
end
return reply
`,
});
