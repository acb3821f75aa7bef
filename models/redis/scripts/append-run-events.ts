import { defineScript } from '../script-definition.js';
import { appendEventsFunction } from './includes/append-events.js';

/**
 * Appends a run's events to its log and publishes them (`append_events`, includes/append-events.ts):
 * a batch costs one call and one PUBLISH (SPUBLISH on a cluster) however many events it holds (LLM
 * deltas come in bursts). KEYS: the run's stream, its counter, its per-lease delta numbers. ARGV:
 * publish command (PUBLISH or SPUBLISH), channel, max length, ttl ms, then (event, data, lease,
 * seq) quadruples (lease and seq empty for an unnumbered event).
 * Returns the last number used.
 */
export const appendRunEvents = defineScript<number>({
  name: 'appendRunEvents',
  keys: 3,
  lua: `${appendEventsFunction}
local events = {}
for i = 5, #ARGV, 4 do events[#events + 1] = { ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3] } end
return append_events(KEYS[1], KEYS[2], KEYS[3], ARGV[1], ARGV[2], ARGV[3], ARGV[4], events)
`,
});
