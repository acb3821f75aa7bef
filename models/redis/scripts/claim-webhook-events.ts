import { defineScript } from '../script-definition.js';

/**
 * Takes the events of a run's log that its `output` or `logs` webhook has not carried yet
 * (docs/webhooks.md, "Output and logs"): those after the event's cursor, at most `count`, and
 * moves the cursor past them, in one step. Two deliveries of the same run and event being built
 * at once (two windows due together) so get disjoint events, in order.
 * KEYS: the run's event log (a stream whose ids are `<n>-0`), the cursor.
 * ARGV: count, the cursor's lifetime (ms).
 * Returns the cursor before, then the stream entries taken ([id, [field, value...]], ...).
 */
export const claimWebhookEvents = defineScript<[string, ...Array<[string, string[]]>]>({
  name: 'claimWebhookEvents',
  keys: 2,
  lua: `
local from = tonumber(redis.call('GET', KEYS[2]) or '0')
local rows = redis.call('XRANGE', KEYS[1], '(' .. from .. '-0', '+', 'COUNT', ARGV[1])
if #rows > 0 then
  local last = string.match(rows[#rows][1], '^(%d+)')
  redis.call('SET', KEYS[2], last, 'PX', ARGV[2])
end
return { tostring(from), unpack(rows) }
`,
});
