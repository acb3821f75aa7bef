import type { RedisClient } from '../../models/redis-connection.js';
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
  duringFault?(cluster: ChaosCluster, redis: RedisClient, accepted: Map<string, number>): Promise<string>;
  /** Planted at rest, after every run has settled and before the final state is read. */
  atRest?(cluster: ChaosCluster, redis: RedisClient, accepted: Map<string, number>): Promise<string>;
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

/** Run ids of the account's runs in `status` now (the listing, one page is plenty here). */
async function runsWithStatus(cluster: ChaosCluster, status: string): Promise<string[]> {
  const res = await fetch(`${cluster.directUrl}/v1/jobs?status=${status}&limit=100`, { headers: { authorization: `Bearer ${cluster.apiKey}` } });
  const page = (await res.json()) as { data: Array<{ run_id: string }> };
  return page.data.map((j) => j.run_id);
}

/** Deletes a run's BullMQ job everywhere it can be: its hash and every list or sorted set of the queues. */
async function deleteJob(redis: RedisClient, runId: string): Promise<number> {
  let removed = 0;
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `${PREFIX}:q:*`, 'COUNT', 1000);
    cursor = next;
    for (const key of keys) {
      if (key.endsWith(`:${runId}`)) removed += await redis.del(key);
      else {
        const type = await redis.type(key);
        if (type === 'list') removed += await redis.lrem(key, 0, runId);
        else if (type === 'zset') removed += await redis.zrem(key, runId);
        else if (type === 'set') removed += await redis.srem(key, runId);
      }
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
    async duringFault(cluster, redis) {
      // The jobs of the runs running or queued now are deleted, then every worker is killed: each of
      // those runs is lost and needs its job back in a queue, which it no longer has. (What a
      // requeue that silently did nothing would leave.)
      // Every run running or queued now: one may finish between the listing and the delete,
      // but not all of them.
      const victims = [...(await runsWithStatus(cluster, 'running')), ...(await runsWithStatus(cluster, 'queued'))].slice(0, 10);
      if (!victims.length) throw new Error('skip-requeue: no running or queued run to plant it on');
      let removed = 0;
      for (const id of victims) removed += await deleteJob(redis, id);
      await cluster.fleet.kill(cluster.fleet.members.map((m) => m.index));
      cluster.fleet.respawnDead();
      return `deleted the jobs of ${victims.join(', ')} (${removed} entries) and killed every worker`;
    },
  },
  // Reordering or duplicating an event in the gateway's log cannot be planted from outside: the
  // log is a Redis stream whose ids only grow (XADD refuses an id below the last), the server
  // passes on only ids above the last it sent, and it closes after the first `done`, so a copy
  // appended to the log never reaches a client. These two plant the fault where it can happen
  // outside the gateway, between it and the clients (a misbehaving proxy), and prove that the
  // checker sees what such a client would see.
  {
    name: 'sse-duplicate',
    scenario: 'gateway-kill',
    caughtBy: 'sseViolations',
    async duringFault(cluster) {
      for (const f of cluster.fronts) f.sseTamper = 'duplicate';
      return 'the front doors send every progress frame twice';
    },
  },
  {
    name: 'sse-reorder',
    scenario: 'gateway-kill',
    caughtBy: 'sseViolations',
    async duringFault(cluster) {
      for (const f of cluster.fronts) f.sseTamper = 'reorder';
      return 'the front doors send every progress frame after the frame behind it';
    },
  },
];

export function sabotageNamed(name: string): Sabotage {
  const s = SABOTAGES.find((x) => x.name === name);
  if (!s) throw new Error(`no sabotage ${name}; there are ${SABOTAGES.map((x) => x.name).join(', ')}`);
  return s;
}
