/**
 * `request_gate(revoked, limiter, interval, tolerance, limiting)`: the request gate's check, an
 * API key's revocation marker, then its rate limit (GCRA on Redis's clock, so instances with
 * skewed clocks agree). Shared by requestGate, which runs it alone, and gatedCreateRun, which
 * runs it before a submission's create, saving a round trip per accepted job.
 * Takes the marker's and the limiter's keys, the emission interval and burst tolerance (ms)
 * and whether limiting is on ('1'/'0'), as the caller's KEYS and ARGV hold them.
 * Returns the refusal, {-1, 0, 0} (revoked) or {0, retry after ms, 0} (limited); or nil, the
 * requests remaining (-1 when limiting is off) and the wait until the key may make one request
 * more than that (ms: the limited answer's retry after, one request later).
 */
export const requestGateFunction = `
local function request_gate(revoked, limiter, interval_ms, tolerance_ms, limiting)
  if redis.call('EXISTS', revoked) == 1 then return { -1, 0, 0 } end
  if limiting ~= '1' then return nil, -1, 0 end
  local interval = tonumber(interval_ms)
  local tolerance = tonumber(tolerance_ms)
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local tat = tonumber(redis.call('GET', limiter) or now)
  if tat < now then tat = now end
  local new_tat = tat + interval
  if new_tat - tolerance > now then return { 0, math.ceil(new_tat - tolerance - now), 0 } end
  redis.call('SET', limiter, new_tat, 'PX', math.ceil(new_tat - now) + 1000)
  local room = tolerance - (new_tat - now)
  local remaining = math.floor(room / interval)
  return nil, remaining, math.ceil((remaining + 1) * interval - room)
end
`;
