import { defineScript } from '../script-definition.js';

/**
 * Moves a lease record to a new worker and gateway if it is still held by the worker named: a
 * compare-and-set, so of two instances offered the same lease only one adopts it.
 * KEYS: the lease. ARGV: from worker, to worker, to gateway, ttl ms. Returns 1 if moved, else 0.
 */
export const adoptLease = defineScript<number>({
  name: 'adoptLease',
  keys: 1,
  lua: `
local raw = redis.call('GET', KEYS[1])
if not raw then return 0 end
local lease = cjson.decode(raw)
if lease.worker_id ~= ARGV[1] then return 0 end
lease.worker_id = ARGV[2]
lease.gateway_id = ARGV[3]
redis.call('SET', KEYS[1], cjson.encode(lease), 'PX', ARGV[4])
return 1
`,
});
