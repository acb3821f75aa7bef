import { Redis } from 'ioredis';
import { PREFIX, type ChaosCluster } from './chaos-cluster.js';

/**
 * Known faults planted from the harness side, by writing to Redis behind the gateways' backs
 * (no switch in production code): each one is what a real bug of its kind would leave, and
 * the invariant checker must report it. `scenario` is the scenario it is planted in.
 */
export interface Sabotage {
  name: string;
  scenario: string;
  /** Planted while the fault is on (e.g. a lost run's job deleted so it is never requeued). */
  duringFault?(cluster: ChaosCluster, redis: Redis, accepted: Map<string, number>): Promise<string>;
  /** Planted at rest, after every run has settled and before the final state is read. */
  atRest?(cluster: ChaosCluster, redis: Redis, accepted: Map<string, number>): Promise<string>;
  /** The verdict column that must be non-zero. */
  caughtBy: 'lost' | 'twice' | 'creditError' | 'sseViolations';
}

async function aSucceededRun(cluster: ChaosCluster, accepted: Map<string, number>): Promise<{ id: string; charged: number }> {
  for (const id of accepted.keys()) {
    const res = await fetch(`${cluster.directUrl}/v1/jobs/${id}`, { headers: { authorization: `Bearer ${cluster.apiKey}` } });
    const job = (await res.json()) as { status: string; cost: { charged: number } };
    if (job.status === 'succeeded' && job.cost.charged > 0) return { id, charged: job.cost.charged };
  }
  throw new Error('sabotage: no succeeded run with a charge to tamper with');
}

async function runsWithStatus(cluster: ChaosCluster, accepted: Map<string, number>, status: string): Promise<string[]> {
  const out: string[] = [];
  for (const id of accepted.keys()) {
    const res = await fetch(`${cluster.directUrl}/v1/jobs/${id}`, { headers: { authorization: `Bearer ${cluster.apiKey}` } }).catch(() => null);
    const job = (await res?.json().catch(() => null)) as { status?: string } | null;
    if (job?.status === status) out.push(id);
  }
  return out;
}

/** Deletes a run's BullMQ job everywhere it can be (its hash and every list or set of its queue). */
async function deleteJob(redis: Redis, runId: string): Promise<number> {
  let removed = 0;
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `${PREFIX}*`, 'COUNT', 1000);
    cursor = next;
    for (const key of keys) {
      const type = await redis.type(key);
      if (key.endsWith(`:${runId}`) && type === 'hash' && (await redis.hexists(key, 'data'))) removed += await redis.del(key);
      else if (type === 'list') removed += await redis.lrem(key, 0, runId);
      else if (type === 'zset' && !key.includes(':acct:')) removed += await redis.zrem(key, runId);
    }
  } while (cursor !== '0');
  return removed;
}

export const SABOTAGES: Sabotage[] = [
  {
    name: 'drop-settlement',
    scenario: 'gateway-kill',
    caughtBy: 'creditError',
    async atRest(cluster, redis, accepted) {
      const run = await aSucceededRun(cluster, accepted);
      // The charge given back, as if the settlement step had never taken it.
      await redis.hincrby(`${PREFIX}:acct:${cluster.accountId}`, 'credits', run.charged);
      return `gave back the ${run.charged} credits charged for ${run.id}`;
    },
  },
  {
    name: 'double-charge',
    scenario: 'worker-kill-storm',
    caughtBy: 'creditError',
    async atRest(cluster, redis, accepted) {
      const run = await aSucceededRun(cluster, accepted);
      await redis.hincrby(`${PREFIX}:acct:${cluster.accountId}`, 'credits', -run.charged);
      return `charged ${run.id} its ${run.charged} credits a second time`;
    },
  },
  {
    name: 'skip-requeue',
    scenario: 'worker-kill-storm',
    caughtBy: 'lost',
    async duringFault(cluster, redis, accepted) {
      // Workers were just killed: the runs they held are running on no one; delete their jobs
      // so no lease loss or stalled check can put them back in a queue.
      const running = await runsWithStatus(cluster, accepted, 'running');
      const queued = running.length ? [] : await runsWithStatus(cluster, accepted, 'queued');
      const victims = (running.length ? running : queued).slice(0, 3);
      let removed = 0;
      for (const id of victims) removed += await deleteJob(redis, id);
      return `deleted the jobs of ${victims.join(', ')} (${removed} entries)`;
    },
  },
  {
    name: 'duplicate-event',
    scenario: 'gateway-kill',
    caughtBy: 'twice',
    async atRest(cluster, redis, accepted) {
      // A second `done` appended to a finished run's log with the next number: what a run
      // settled twice would have logged. (Reordering cannot be planted from outside: the log's
      // ids are Redis stream ids, which only grow.)
      const run = await aSucceededRun(cluster, accepted);
      const stream = `${PREFIX}:ev:${run.id}`;
      const [last] = await redis.xrevrange(stream, '+', '-', 'COUNT', 1);
      const next = Number(String(last[0]).split('-')[0]) + 1;
      const fields = last[1];
      await redis.xadd(stream, `${next}-0`, ...fields);
      await redis.set(`${PREFIX}:evseq:${run.id}`, String(next));
      return `appended a second done (id ${next}) to ${run.id}'s log`;
    },
  },
];

export function sabotageNamed(name: string): Sabotage {
  const s = SABOTAGES.find((x) => x.name === name);
  if (!s) throw new Error(`no sabotage ${name}; there are ${SABOTAGES.map((x) => x.name).join(', ')}`);
  return s;
}
