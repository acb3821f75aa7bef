import type { RunRecord } from '../models/types.js';

/**
 * REDIS_WAIT_REPLICAS for runs' queue writes (a cluster's queues live on other primaries than
 * their runs): of `runs` just added, the ids of those whose queue's writes reached the replicas,
 * one wait per queue (`queueOf` says which: `JobQueues.queueOf`; `queueWrites`, RunDurability's). Without `queueWrites`, all of them. A run
 * left out is left unconfirmed, so the enqueue reconciler adds its job again if a failover took it.
 */
export async function runsOnReplicas(runs: RunRecord[], queueOf: (run: RunRecord) => string, queueWrites?: (queue: string) => Promise<boolean>): Promise<Set<string>> {
  if (!queueWrites) return new Set(runs.map((r) => r.run_id));
  const queues = [...new Set(runs.map(queueOf))];
  const enough = await Promise.all(queues.map((q) => queueWrites(q)));
  const written = new Set(queues.filter((_, i) => enough[i]));
  return new Set(runs.filter((r) => written.has(queueOf(r))).map((r) => r.run_id));
}
