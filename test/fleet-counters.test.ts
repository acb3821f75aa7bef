import assert from 'node:assert/strict';
import { pino } from 'pino';
import type { ConnectedWorker } from '../dispatch/connected-worker.js';
import { FleetCounters, type FleetSnapshot } from '../dispatch/fleet-counters.js';
import { RedisKeys } from '../models/redis/keys.js';
import type { WorkerModels } from '../sdk/protocol/index.js';
import { cleanupPrefix, testRedis, uniquePrefix, until } from './helpers/harness.js';

const KIND = 'inference:image:generate';

function worker(id: string, slots: number, models: WorkerModels = {}, identity?: string): ConnectedWorker {
  return {
    ...(identity ? { identity } : {}),
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
  const redis = testRedis('test-fleet');
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

  const written = async (): Promise<FleetSnapshot> => JSON.parse((await redis.hget(new RedisKeys(prefix).fleetCounts('gw_a'), 'total'))!);

  it('a read made right after a change sees it, though the write is deferred', async () => {
    const a = worker('w_a', 4);
    attached.push(a);
    fleet.changed();
    // The record is not written in this turn...
    assert.equal(await redis.exists(new RedisKeys(prefix).fleetCounts('gw_a')), 0);
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
    assert.deepEqual(full.kinds[KIND].models.m1, { workers: 1, by_tier: { open: 1, trusted: 0, private: 0 }, slots: 2, free: 1, unavailable: 0, unavailable_by_tier: { open: 0, trusted: 0, private: 0 } });
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

/**
 * A worker whose gateway instance died registers again on another one before the dead
 * instance's counts expire: the fleet must count it once, from the moment it registers again.
 */
describe('FleetCounters: a worker registering again under its identity', function () {
  const prefix = uniquePrefix('fleet-identity');
  const redis = testRedis('test-fleet-identity');
  const log = pino({ level: 'silent' });
  const keys = new RedisKeys(prefix);
  const counters: FleetCounters[] = [];
  const instance = (gatewayId: string, workers: ConnectedWorker[], ttlMs = 60_000) => {
    const c = new FleetCounters({ redis, prefix, gatewayId, ttlMs, workers: () => workers, log });
    counters.push(c);
    return c;
  };
  const reader = instance('gw_reader', []);

  after(async () => {
    for (const c of counters) await c.stop();
    await cleanupPrefix(prefix);
    redis.disconnect();
  });

  it('is counted once while the dead instance it left still has counts, with its busy slots and models', async () => {
    // gw_dead counts x (busy, serving m1) and y; then it "dies": it never writes again.
    const x = worker('wkr_01A', 2, { [KIND]: [{ id: 'm1' }] as WorkerModels[string] }, 'operator:op:x');
    const y = worker('wkr_01B', 1, {}, 'operator:op:y');
    x.leases.add('l_x');
    const dead = instance('gw_dead', [x, y]);
    dead.changed();
    await dead.read();
    assert.equal((await reader.read()).workers, 2);

    // x registers again on gw_alive: its old entry is retired first, then the new one counted.
    const again = worker('wkr_01C', 2, { [KIND]: [{ id: 'm1' }] as WorkerModels[string] }, 'operator:op:x');
    const alive = instance('gw_alive', [again]);
    await alive.retireElsewhere('operator:op:x');
    const between = await reader.read();
    assert.equal(between.workers, 1, 'retired before the new connection is counted: never counted twice');
    alive.changed();
    await alive.read();
    const seen = await reader.read();
    assert.equal(seen.workers, 2);
    assert.equal(seen.slots, 3);
    assert.equal(seen.busy, 0, 'the dead connection\'s lease is not counted busy');
    assert.equal(seen.kinds[KIND].workers, 2);
    assert.equal(seen.kinds[KIND].models.m1.workers, 1);
    assert.equal(seen.kinds[KIND].models.m1.free, 2);
  });

  it('a live instance still holding the old connection is read without it until it lets it go, then counts nothing for it', async () => {
    const old = worker('wkr_02A', 1, {}, 'operator:op:z');
    const heldBy = [old];
    const live = instance('gw_live', heldBy);
    live.changed();
    await live.read();
    const before = (await reader.read()).workers;
    const fresh = worker('wkr_02B', 1, {}, 'operator:op:z');
    const other = instance('gw_other', [fresh]);
    await other.retireElsewhere('operator:op:z');
    other.changed();
    await other.read();
    assert.equal((await reader.read()).workers, before, 'the old connection is not counted beside the new one');
    // The live instance changes the old connection's share (a lease) before hearing of it: still once.
    old.leases.add('l_old');
    live.changed(old);
    await live.read();
    const during = await reader.read();
    assert.equal(during.workers, before);
    assert.equal(during.busy, 0);
    // It lets the old connection go: its share and retirement mark leave its counts together.
    heldBy.pop();
    live.changed();
    await live.read();
    assert.equal((await reader.read()).workers, before);
    assert.equal(await redis.scard(keys.fleetRetired('gw_live')), 0);
    assert.equal(await redis.hexists(keys.fleetCounts('gw_live'), 's:wkr_02A'), 0);
  });

  it('an instance\'s counts and retirement marks expire one TTL after its last write or refresh', async () => {
    const w = worker('wkr_03A', 1, {}, 'operator:op:w');
    const short = instance('gw_short', [w], 1_000);
    short.changed();
    await short.read();
    await instance('gw_taker', []).retireElsewhere('operator:op:w');
    for (const key of [keys.fleetCounts('gw_short'), keys.fleetRetired('gw_short')]) {
      const ttl = await redis.pttl(key);
      assert.ok(ttl > 0 && ttl <= 1_000, `${key} expires within the TTL (${ttl} ms)`);
    }
    await short.refresh();
    assert.ok((await redis.pttl(keys.fleetRetired('gw_short'))) > 0, 'a refresh keeps the marks as long as the counts');
  });

  it('counts that lapsed under a live instance are written again whole at its next refresh', async () => {
    const w = worker('wkr_04A', 3, {}, 'operator:op:v');
    const lapsing = instance('gw_lapsing', [w]);
    lapsing.changed();
    await lapsing.read();
    await redis.del(keys.fleetCounts('gw_lapsing'));
    await lapsing.refresh();
    await until('the counts written again', async () => (await redis.hget(keys.fleetCounts('gw_lapsing'), 's:wkr_04A')) !== null);
    assert.equal(JSON.parse((await redis.hget(keys.fleetCounts('gw_lapsing'), 'total'))!).slots, 3);
  });
});

/**
 * A registration or a departure adds or takes off one worker's share: the counts must be what a
 * full count says, the identity fields too, without counting every attached worker again (a
 * full count per registration made a reconnect storm quadratic: bench/fleet.ts).
 */
describe('FleetCounters: workers joining and leaving are counted one by one', function () {
  const prefix = uniquePrefix('fleet-join');
  const redis = testRedis('test-fleet-join');
  const keys = new RedisKeys(prefix);
  const attached: ConnectedWorker[] = [];
  let fullCounts = 0;
  const fleet = new FleetCounters({ redis, prefix, gatewayId: 'gw_j', ttlMs: 60_000, workers: () => (fullCounts++, attached), log: pino({ level: 'silent' }) });
  const hash = async () => redis.hgetall(keys.fleetCounts('gw_j'));

  after(async () => {
    await fleet.stop();
    await cleanupPrefix(prefix);
    redis.disconnect();
  });

  it('adds and takes off shares and identity fields without a full count, and ends where a full count does', async () => {
    const a = worker('wkr_A', 2, { [KIND]: [{ id: 'm1' }] as WorkerModels[string] }, 'operator:op:a');
    attached.push(a);
    fleet.changed(); // the first write counts all
    await fleet.read();
    fullCounts = 0;

    const b = worker('wkr_B', 3, {}, 'operator:op:b');
    const c = worker('wkr_C', 1);
    attached.push(b, c);
    fleet.joined(b);
    fleet.joined(c);
    b.leases.add('l_b'); // a lease in the same turn as its registration
    fleet.changed(b);
    let seen = await fleet.read();
    assert.equal(seen.workers, 3);
    assert.equal(seen.busy, 1);
    assert.equal((await hash())['i:operator:op:b'], 'wkr_B');

    // b leaves, and the same worker comes back on a new connection in the same turn: counted once.
    attached.splice(attached.indexOf(b), 1);
    fleet.left(b);
    const b2 = worker('wkr_B2', 3, {}, 'operator:op:b');
    attached.push(b2);
    fleet.joined(b2);
    b.leases.delete('l_b'); // its lease released after it left counts nothing
    fleet.changed(b);
    seen = await fleet.read();
    assert.equal(seen.workers, 3);
    assert.equal(seen.busy, 0);
    const fields = await hash();
    assert.equal(fields['i:operator:op:b'], 'wkr_B2');
    assert.equal(fields['s:wkr_B'], undefined);
    assert.ok(fields['s:wkr_B2']);

    attached.splice(attached.indexOf(a), 1);
    fleet.left(a);
    seen = await fleet.read();
    assert.equal(seen.kinds[KIND].models.m1, undefined);
    assert.equal((await hash())['i:operator:op:a'], undefined);
    assert.equal(fullCounts, 0, 'no join or departure counted every worker again');

    const incremental = await hash();
    fleet.changed();
    await fleet.read();
    assert.equal(fullCounts, 1);
    assert.deepEqual(await hash(), incremental, 'a full count finds the same hash');
  });
});
