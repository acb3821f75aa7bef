import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { ReplicaWaitError, ReplicaWaiter } from '../models/replica-waiter.js';
import { RunDurability } from '../models/run-durability.js';
import type { BatchRecord } from '../models/batch-types.js';
import type { RunRecord, RunStatus } from '../models/types.js';
import { testRedis } from './helpers/harness.js';

/**
 * What REDIS_WAIT_REPLICAS asks of the store when the replicas fall short, per step. 99 replicas
 * are asked of the tests' Redis, so every WAIT here falls short (after 20 ms) and the answer rests on the
 * store's: an accepted run or batch must exist, a settled run must be terminal.
 */
describe('RunDurability (REDIS_WAIT_REPLICAS, short of the replicas)', () => {
  const redis = testRedis('test-run-durability');
  const probeKey = `sytest-durability-${randomBytes(4).toString('hex')}:replica-wait`;
  const runs = new Map<string, Pick<RunRecord, 'status'>>();
  const batches = new Set<string>();
  const store = {
    get: async (id: string) => (runs.get(id) ?? null) as RunRecord | null,
    getBatch: async (id: string) => (batches.has(id) ? ({ batch_id: id } as BatchRecord) : null),
  };
  const durability = new RunDurability(new ReplicaWaiter({ redis, replicas: 99, timeoutMs: 20, probeKey }), store, () => probeKey);
  const refused = (p: Promise<void>) => p.then(() => null, (err: unknown) => err);

  after(async () => {
    await redis.del(probeKey);
    redis.disconnect();
  });

  it('answers an accept whose run is there, and refuses one whose run is gone', async () => {
    runs.set('run_a', { status: 'queued' });
    await durability.accepted('run_a');
    assert.ok((await refused(durability.accepted('run_gone'))) instanceof ReplicaWaitError);
  });

  it('answers a batch whose record is there, and refuses one whose record is gone', async () => {
    batches.add('batch_a');
    await durability.batchAccepted('batch_a');
    assert.ok((await refused(durability.batchAccepted('batch_gone'))) instanceof ReplicaWaitError);
  });

  it('answers a settle whose run is terminal, and refuses one whose run is back to running or gone', async () => {
    for (const status of ['succeeded', 'failed', 'canceled'] as RunStatus[]) {
      runs.set('run_s', { status });
      await durability.settled('run_s');
    }
    runs.set('run_s', { status: 'running' });
    assert.ok((await refused(durability.settled('run_s'))) instanceof ReplicaWaitError, 'a settle the failover took');
    assert.ok((await refused(durability.settled('run_gone'))) instanceof ReplicaWaitError);
  });
});
