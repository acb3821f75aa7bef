/**
 * `append_events(stream, counter, dseq, publish, channel, maxlen, ttl, events)`: numbers a run's events
 * after the last number used, appends them to its log and publishes them as ONE message of
 * "<id> <event> <data>" lines, in one atomic step: the live order is the log order, and no two
 * events of a run ever share a number, whichever instance appended them. `events` is a list of
 * {event, data, lease, seq} (lease and seq '' for an unnumbered event); a numbered event (a delta
 * a worker numbered, protocol 4) at or below its lease's stored seq in `dseq` is skipped. The
 * counter spares an XREVRANGE per call; the stream's top is read only when the counter is
 * missing (a log older than it) or behind (an older instance appended meanwhile, which its XADD
 * refuses). Returns the last number used. Shared by appendRunEvents and transitionRun, which
 * logs a status change in the step that makes it.
 *
 * `publish` is the caller's `pubsub.command` (models/redis-pubsub.ts): 'SPUBLISH' on a Redis
 * Cluster, where it reaches only the channel's shard (the channel is in the script's slot, as a
 * script's SPUBLISH requires), anything else PUBLISH, so one script serves both deployments and
 * no other command can be named through it.
 */
export const appendEventsFunction = `
local function append_events(stream, counter, dseq, publish, channel, maxlen, ttl, events)
  local function top()
    local t = redis.call('XREVRANGE', stream, '+', '-', 'COUNT', 1)
    if t[1] then return tonumber(string.match(t[1][1], '^(%d+)')) end
    return 0
  end
  local seq = tonumber(redis.call('GET', counter) or '')
  if not seq then seq = top() end
  local lines = {}
  local guarded = false
  for _, e in ipairs(events) do
    local skip = false
    if e[3] ~= '' then
      local d = tonumber(e[4])
      if d <= (tonumber(redis.call('HGET', dseq, e[3]) or '0')) then
        skip = true
      else
        redis.call('HSET', dseq, e[3], d)
        guarded = true
      end
    end
    if not skip then
      seq = seq + 1
      local r = redis.pcall('XADD', stream, 'MAXLEN', '~', maxlen, seq .. '-0', 'e', e[1], 'd', e[2])
      if type(r) == 'table' and r.err then
        seq = top() + 1
        redis.call('XADD', stream, 'MAXLEN', '~', maxlen, seq .. '-0', 'e', e[1], 'd', e[2])
      end
      lines[#lines + 1] = seq .. ' ' .. e[1] .. ' ' .. e[2]
    end
  end
  if guarded then redis.call('PEXPIRE', dseq, ttl) end
  if #lines == 0 then return seq end
  redis.call(publish == 'SPUBLISH' and 'SPUBLISH' or 'PUBLISH', channel, table.concat(lines, '\\n'))
  redis.call('SET', counter, seq, 'PX', ttl)
  redis.call('PEXPIRE', stream, ttl)
  return seq
end
`;
