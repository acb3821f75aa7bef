/**
 * `run_reply(tag, key)`: the reply of a run script that hands back the whole record, `{tag,
 * HGETALL...}` (run-codec.ts decodes it).
 */
export const runReply = `
local function run_reply(tag, key)
  local reply = { tag }
  for _, v in ipairs(redis.call('HGETALL', key)) do reply[#reply + 1] = v end
  return reply
end
`;
