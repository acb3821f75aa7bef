import assert from 'node:assert/strict';
import { Redis } from 'ioredis';
import { RedisKeys } from '../models/redis/keys.js';
import { RedisStores } from '../models/redis/redis-stores.js';
import { REDIS_URL, cleanupPrefix, newRunSpec, uniquePrefix } from './helpers/harness.js';
import { createMany, listAll, newestFirst } from './helpers/many-runs.js';
import { storeOptions } from './helpers/store-targets.js';

const IMAGE = 'inference:image:generate';
const RIG = 'inference:rig';
const STATUSES = ['queued', 'running', 'succeeded', 'failed', 'canceled'] as const;

/**
 * What the Redis store's listing does with its indexes beyond the store contract
 * (store-contract-listing.test.ts): the ids of runs that expired since, and accounts whose runs
 * were made by a gateway that kept no status-and-kind index.
 */
describe('Redis run store: listing from its indexes', () => {
  const prefix = uniquePrefix('run-listing');
  const keys = new RedisKeys(prefix);
  const redis = new Redis(REDIS_URL);
  const stores = new RedisStores(redis, prefix, storeOptions);
  /** Every run index an account of these tests can have (their runs are of two kinds). */
  const indexesOf = (accountId: string) =>
    [undefined, ...STATUSES].flatMap((status) => [undefined, IMAGE, RIG].map((kind) => keys.accountRunIndex(accountId, { status, kind })));
  after(async () => {
    redis.disconnect();
    await cleanupPrefix(prefix);
  });

  it('goes on past the ids of runs that expired, however many, and prunes them', async () => {
    const a = await stores.accounts.create({ name: 'a', credits: 100_000 });
    const ids = await createMany(stores.runs, Array.from({ length: 2_501 }, () => newRunSpec(a.id, { price: 1 })));
    await Promise.all(ids.map((id) => stores.runs.transition({ run_id: id, account_id: a.id }, { from: ['queued'], to: 'canceled' })));
    // The 2,500 newest reach their retention: their records expire, their index entries stay
    // until a listing (or the index's trim by age) meets them.
    await redis.unlink(...ids.slice(1).map((id) => keys.run(id)));

    const canceled = keys.accountRunIndex(a.id, { status: 'canceled' });
    const { ids: found, pages } = await listAll(stores.runs, a.id, { status: 'canceled', limit: 10 });
    assert.deepEqual(found, [ids[0]], 'the one run left is found behind them');
    assert.ok(pages > 1, 'no request read all 2,500: the first pages are empty and say where to go on');
    assert.deepEqual(await redis.zrange(canceled, '0', '-1'), [ids[0]], 'the expired ids are pruned as read');
    assert.deepEqual((await listAll(stores.runs, a.id, { status: 'canceled', limit: 10 })).pages, 1);
  });

  it('keeps each run in exactly the indexes of its status and kind', async () => {
    const a = await stores.accounts.create({ name: 'a', credits: 1_000 });
    const [id] = await createMany(stores.runs, [newRunSpec(a.id, { kind: RIG, price: 1 })]);
    const holding = async () => {
      const held = [];
      for (const key of indexesOf(a.id).sort()) if ((await redis.zscore(key, id)) !== null) held.push(key.slice(keys.accountRuns(a.id).length));
      return held;
    };
    assert.deepEqual(await holding(), ['', `:k:${RIG}`, ':s:queued', `:sk:queued:${RIG}`]);
    await stores.runs.transition({ run_id: id, account_id: a.id }, { from: ['queued'], to: 'running' });
    assert.deepEqual(await holding(), ['', `:k:${RIG}`, ':s:running', `:sk:running:${RIG}`]);
    await stores.runs.transition({ run_id: id, account_id: a.id }, { from: ['running'], to: 'failed' });
    assert.deepEqual(await holding(), ['', `:k:${RIG}`, ':s:failed', `:sk:failed:${RIG}`]);
  });

  it("finds runs made before the status-and-kind index: it is built from the status and kind indexes once, then kept", async function () {
    this.timeout(30_000);
    const a = await stores.accounts.create({ name: 'a', credits: 100_000 });
    const rigs = [10, 1_500, 2_990];
    const specs = Array.from({ length: 3_000 }, (_, i) => newRunSpec(a.id, { kind: rigs.includes(i) ? RIG : IMAGE, price: 1 }));
    const ids = await createMany(stores.runs, specs);
    await stores.runs.transition({ run_id: ids[1_500], account_id: a.id }, { from: ['queued'], to: 'running' });
    // As a gateway before the index left them: no `kind` field on the records, no `:sk:` index.
    const pipeline = redis.pipeline();
    for (const id of ids) pipeline.hdel(keys.run(id), 'kind');
    for (const key of indexesOf(a.id)) if (key.includes(':sk:')) pipeline.del(key);
    await pipeline.exec();
    assert.equal(await redis.exists(keys.accountRunIndexesBuilt(a.id)), 0);

    const list = async (status: 'queued' | 'running') => (await listAll(stores.runs, a.id, { status, kind: RIG, limit: 2 })).ids;
    assert.deepEqual(await list('queued'), newestFirst(ids, [10, 2_990]));
    assert.deepEqual(await list('running'), [ids[1_500]]);
    assert.deepEqual((await stores.runs.list(a.id, { status: 'queued', kind: 'no-such-kind', limit: 2 })).runs, []);
    assert.deepEqual(await redis.hgetall(keys.accountRunIndexesBuilt(a.id)), { [`queued:${RIG}`]: '1', [`running:${RIG}`]: '1' }, 'a kind no run has is marked built for none');

    // Built once: a run taken out of the index by hand stays out (a second build would put it back).
    await redis.zrem(keys.accountRunIndex(a.id, { status: 'queued', kind: RIG }), ids[10]);
    assert.deepEqual(await list('queued'), [ids[2_990]]);
    await redis.zadd(keys.accountRunIndex(a.id, { status: 'queued', kind: RIG }), 0, ids[10]);

    // An old record's first transition reads its kind from `doc`, stores it and moves it between the indexes.
    const moved = await stores.runs.transition({ run_id: ids[2_990], account_id: a.id }, { from: ['queued'], to: 'running' });
    assert.equal(moved.run?.kind, RIG);
    assert.equal(await redis.hget(keys.run(ids[2_990]), 'kind'), RIG);
    assert.deepEqual(await list('queued'), [ids[10]]);
    assert.deepEqual(await list('running'), newestFirst(ids, [1_500, 2_990]));
  });
});
