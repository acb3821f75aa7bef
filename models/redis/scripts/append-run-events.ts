import { defineScript } from '../script-definition.js';

/**
 * Numbers a run's events after the last number used, appends them to its log and publishes them
 * as ONE message of "<id> <event> <data>" lines, in one atomic step: the live order is the log
 * order, and no two events of a run ever share a number, whichever instance appended them. A
 * batch costs one call and one PUBLISH however many events it holds (LLM deltas come in bursts).
 * A numbered event (a delta a worker numbered, protocol 4) at or below its lease's stored seq is
 * skipped: the check and the append are one step, whichever instance the worker resends through.
 * The counter spares an XREVRANGE per call; the stream's top is read only when the counter is
 * missing (a log older than it) or behind (an instance of the previous version appended
 * meanwhile, which its XADD refuses).
 * KEYS: the run's stream, its counter, its per-lease delta numbers. ARGV: channel, max length,
 * ttl ms, then (event, data, lease, seq) quadruples (lease and seq empty for an unnumbered event).
 * Returns the last number used.
 */
export const appendRunEvents = defineScript<number>({
  name: 'appendRunEvents',
  keys: 3,
  lua: `
local function top()
  local t = redis.call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', 1)
  if t[1] then return tonumber(string.match(t[1][1], '^(%d+)')) end
  return 0
end
local seq = tonumber(redis.call('GET', KEYS[2]) or '')
if not seq then seq = top() end
local lines = {}
local guarded = false
for i = 4, #ARGV, 4 do
  local skip = false
  if ARGV[i + 2] ~= '' then
    local d = tonumber(ARGV[i + 3])
    if d <= (tonumber(redis.call('HGET', KEYS[3], ARGV[i + 2]) or '0')) then
      skip = true
    else
      redis.call('HSET', KEYS[3], ARGV[i + 2], d)
      guarded = true
    end
  end
  if not skip then
    seq = seq + 1
    local r = redis.pcall('XADD', KEYS[1], 'MAXLEN', '~', ARGV[2], seq .. '-0', 'e', ARGV[i], 'd', ARGV[i + 1])
    if type(r) == 'table' and r.err then
      seq = top() + 1
      redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[2], seq .. '-0', 'e', ARGV[i], 'd', ARGV[i + 1])
    end
    lines[#lines + 1] = seq .. ' ' .. ARGV[i] .. ' ' .. ARGV[i + 1]
  end
end
if guarded then redis.call('PEXPIRE', KEYS[3], ARGV[3]) end
if #lines == 0 then return seq end
redis.call('PUBLISH', ARGV[1], table.concat(lines, '\\n'))
redis.call('SET', KEYS[2], seq, 'PX', ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return seq
`,
});
