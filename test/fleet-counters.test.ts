import assert from 'node:assert/strict';
import { pino } from 'pino';
import type { ConnectedWorker } from '../dispatch/connected-worker.js';
import { FleetCounters, type FleetSnapshot } from '../dispatch/fleet-counters.js';
import { RedisKeys } from '../models/redis/keys.js';
import { createRedis } from '../models/redis-connection.js';
import type { WorkerModels } from '../sdk/protocol/index.js';
import { REDIS_URL, cleanupPrefix, uniquePrefix } from './helpers/harness.js';

const KIND = 'inference:image:generate';

function worker(id: string, slots: number, models: WorkerModels = {}): ConnectedWorker {
  return {
    info: { worker_id: id, kinds: [KIND], tier: 'open', slots, busy: 0, gateway_id: 'gw', owner: { type: 'operator', id: 'op' }, hardware: {}, software: {}, models, connected_at: new Date().toISOString() },
    queues: [],
    send: () => {},
    close: () => {},
    leases: new Set(),
    cursor: 0,
    filling: false,
    refill: false,
    draining: false,
  };
}

/**
 * The counts are written once per event-loop turn and, on a lease or release, only the changed
 * worker's share is counted again: what a reader sees must still be what a full count says,
 * and a read made right after a change must see it.
 */
describe('FleetCounters', function () {
  const prefix = uniquePrefix('fleet');
  const redis = createRedis(REDIS_URL, { name: 'test-fleet' });
  const attached: ConnectedWorker[] = [];
  // max_concurrency makes a model's free slots depend on the leases held of it.
  const leaseModel = new Map<string, string>();
  const fleet = new FleetCounters({
    redis,
    prefix,
    gatewayId: 'gw_a',
    ttlMs: 60_000,
    workers: () => attached,
    leasesOf: (w, _kind, model) => [...w.leases].filter((id) => leaseModel.get(id) === model).length,
    log: pino({ level: 'silent' }),
  });
  /** A second instance's view (same Redis, nothing attached), so the read sums records in Redis. */
  const reader = new FleetCounters({ redis, prefix, gatewayId: 'gw_b', ttlMs: 60_000, workers: () => [], log: pino({ level: 'silent' }) });

  after(async () => {
    await fleet.stop();
    await cleanupPrefix(prefix);
    redis.disconnect();
  });

  const written = async (): Promise<FleetSnapshot> => JSON.parse((await redis.get(new RedisKeys(prefix).fleetInstance('gw_a')))!);

  it('a read made right after a change sees it, though the write is deferred', async () => {
    const a = worker('w_a', 4);
    attached.push(a);
    fleet.changed();
    // The record is not written in this turn...
    assert.equal(await redis.exists(new RedisKeys(prefix).fleetInstance('gw_a')), 0);
    fleet.changed();
    a.leases.add('l1');
    fleet.changed(a);
    // ...but this instance's read issues it first.
    const seen = await fleet.read();
    assert.equal(seen.workers, 1);
    assert.equal(seen.busy, 1);
    assert.equal(seen.kinds[KIND].busy, 1);
    a.leases.delete('l1');
    fleet.changed(a);
    assert.equal((await fleet.read()).busy, 0);
  });

  it('a change is written by the end of the turn, for the other instances to read', async () => {
    const a = attached[0];
    a.leases.add('l2');
    fleet.changed(a);
    await new Promise((r) => setImmediate(r));
    assert.equal((await reader.read()).busy, 1);
    a.leases.delete('l2');
    fleet.changed(a);
  });

  it('reads in flight together share one round trip; a read after a change on this instance starts its own and sees it', async () => {
    const w = worker('w_shared', 2);
    let reads = 0;
    // Counts the reads that reach Redis (each begins with the index lookup).
    const counting = new Proxy(redis, {
      get(target, prop) {
        if (prop === 'zrangebyscore') return (...args: Parameters<typeof redis.zrangebyscore>) => (reads++, target.zrangebyscore(...args));
        const value = Reflect.get(target, prop);
        return typeof value === 'function' ? value.bind(target) : value;
      },
    });
    const shared = new FleetCounters({ redis: counting, prefix, gatewayId: 'gw_shared', ttlMs: 60_000, workers: () => [w], log: pino({ level: 'silent' }) });
    try {
      shared.changed();
      const views = await Promise.all([shared.read(), shared.read(), shared.read()]);
      assert.equal(reads, 1);
      assert.ok(views.every((v) => v.kinds[KIND].workers >= 1 && v.busy === views[0].busy));

      const before = shared.read();
      w.leases.add('l_shared');
      shared.changed(w);
      const after = shared.read();
      await before;
      assert.equal(reads, 3);
      assert.equal((await after).kinds[KIND].busy, 1);
    } finally {
      await shared.stop();
    }
  });

  it('leases and releases counted worker by worker sum to what a full count says', async () => {
    const b = worker('w_b', 3, { [KIND]: [{ id: 'm1', max_concurrency: 2 }, { id: 'm2' }] as WorkerModels[string] });
    const c = worker('w_c', 2, { [KIND]: [{ id: 'm2' }, { id: 'm3' }] as WorkerModels[string] });
    attached.push(b, c);
    fleet.changed();
    const steps: Array<[ConnectedWorker, string, string, 'add' | 'delete']> = [
      [b, 'b1', 'm1', 'add'],
      [b, 'b2', 'm1', 'add'],
      [c, 'c1', 'm3', 'add'],
      [b, 'b3', 'm2', 'add'],
      [b, 'b1', 'm1', 'delete'],
      [c, 'c2', 'm2', 'add'],
      [attached[0], 'a1', '', 'add'],
    ];
    for (const [w, id, model, op] of steps) {
      if (op === 'add') {
        w.leases.add(id);
        leaseModel.set(id, model);
      } else w.leases.delete(id);
      fleet.changed(w);
      await fleet.read();
    }
    const incremental = await written();
    // A full count from scratch: a change that names no worker counts them all again.
    fleet.changed();
    await fleet.read();
    const full = await written();
    assert.deepEqual(incremental, full);
    assert.equal(full.busy, 5);
    assert.deepEqual(full.kinds[KIND].models.m1, { workers: 1, by_tier: { open: 1, trusted: 0, private: 0 }, slots: 2, free: 1 });
    assert.equal(full.kinds[KIND].models.m2.free, 1);
    assert.equal(full.kinds[KIND].without_models, 1);
  });

  it('a worker gone drops out with its models, and a late release of its lease counts nothing for it', async () => {
    const c = attached.pop()!;
    fleet.changed();
    c.leases.delete('c1');
    fleet.changed(c);
    const seen = await fleet.read();
    assert.equal(seen.workers, 2);
    assert.equal(seen.kinds[KIND].models.m3, undefined);
    assert.equal(seen.kinds[KIND].models.m2.workers, 1);
  });
});
