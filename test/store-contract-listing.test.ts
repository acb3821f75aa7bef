import assert from 'node:assert/strict';
import type { RunStatus } from '../models/types.js';
import { newRunSpec } from './helpers/harness.js';
import { createMany, listAll, newestFirst } from './helpers/many-runs.js';
import { describeEachStore } from './helpers/store-targets.js';

const IMAGE = 'inference:image:generate';
const RIG = 'inference:rig';

/**
 * The store contract (store-contract.test.ts) for listing: every run matching a filter is
 * found, newest first, however many of the account's other runs come between them, and the
 * cursor ends only after the last one (issue 28, "Listing that is complete").
 */
describe('store contract: listing', () => {
  describeEachStore((stores) => {
    it('finds every match of a status, a kind or both among thousands of other runs, in pages, newest first', async function () {
      this.timeout(60_000);
      const a = await stores.accounts.create({ name: 'a', credits: 100_000 });
      // Matches at the newest end, in the middle and at the oldest end, each far more than a
      // page and the old scan's 1,000 runs apart from the next.
      const total = 2_600;
      const rigs = [3, 1_300, 2_597];
      const canceled = [0, 1_250, 2_599];
      const specs = Array.from({ length: total }, (_, i) => newRunSpec(a.id, { kind: rigs.includes(i) ? RIG : IMAGE, price: 1 }));
      const ids = await createMany(stores.runs, specs);
      for (const i of canceled) assert.equal((await stores.runs.transition({ run_id: ids[i], account_id: a.id }, { from: ['queued'], to: 'canceled' })).ok, true);

      const list = async (q: { status?: RunStatus; kind?: string }) => (await listAll(stores.runs, a.id, { ...q, limit: 2 })).ids;
      assert.deepEqual(await list({ kind: RIG }), newestFirst(ids, rigs));
      assert.deepEqual(await list({ status: 'canceled' }), newestFirst(ids, canceled));
      assert.deepEqual(await list({ status: 'queued', kind: RIG }), newestFirst(ids, rigs), 'both filters: 3 among 2,597 queued runs');
      assert.deepEqual(await list({ status: 'canceled', kind: IMAGE }), newestFirst(ids, canceled));
      assert.deepEqual(await list({ status: 'canceled', kind: RIG }), []);
      assert.deepEqual(await list({ status: 'running' }), []);

      // Unfiltered and one filter over most runs page through them all the same way.
      const queuedImages = (await listAll(stores.runs, a.id, { status: 'queued', kind: IMAGE, limit: 100 })).ids;
      const expected = newestFirst(ids, ids.keys()).filter((id) => !rigs.some((i) => ids[i] === id) && !canceled.some((i) => ids[i] === id));
      assert.deepEqual(queuedImages, expected);
    });

    it('answers a null cursor only when no older run matches', async () => {
      const a = await stores.accounts.create({ name: 'a', credits: 1000 });
      const ids = await createMany(stores.runs, [RIG, IMAGE, RIG, IMAGE].map((kind) => newRunSpec(a.id, { kind, price: 1 })));
      const exact = await stores.runs.list(a.id, { kind: RIG, status: 'queued', limit: 2 });
      assert.deepEqual(exact.runs.map((r) => r.run_id), [ids[2], ids[0]]);
      assert.equal(exact.next, null, 'the page holds the last match');
      const first = await stores.runs.list(a.id, { kind: RIG, status: 'queued', limit: 1 });
      assert.deepEqual(first.runs.map((r) => r.run_id), [ids[2]]);
      assert.equal(first.next, ids[2], 'an older match remains: the next page goes on below this one');
      const second = await stores.runs.list(a.id, { kind: RIG, status: 'queued', limit: 1, before: first.next! });
      assert.deepEqual(second.runs.map((r) => r.run_id), [ids[0]]);
      assert.equal(second.next, null);
    });

    it("moves a run between the status filters' listings as its status changes, for good once it is terminal", async () => {
      const a = await stores.accounts.create({ name: 'a', credits: 1000 });
      const [id] = await createMany(stores.runs, [newRunSpec(a.id, { kind: RIG, price: 1 })]);
      const run = { run_id: id, account_id: a.id };
      const where = async () => {
        const found: string[] = [];
        for (const status of ['queued', 'running', 'succeeded', 'failed', 'canceled'] as const) {
          const alone = (await stores.runs.list(a.id, { status, limit: 10 })).runs.map((r) => r.run_id);
          const withKind = (await stores.runs.list(a.id, { status, kind: RIG, limit: 10 })).runs.map((r) => r.run_id);
          assert.deepEqual(withKind, alone, `${status}: with the kind as without it`);
          if (alone.includes(id)) found.push(status);
        }
        assert.deepEqual((await stores.runs.list(a.id, { status: 'queued', kind: IMAGE, limit: 10 })).runs, [], 'never under another kind');
        return found;
      };
      assert.deepEqual(await where(), ['queued']);
      await stores.runs.transition(run, { from: ['queued'], to: 'running' });
      assert.deepEqual(await where(), ['running']);
      await stores.runs.transition(run, { from: ['running'], to: 'queued' });
      assert.deepEqual(await where(), ['queued']);
      await stores.runs.transition(run, { from: ['queued'], to: 'running' });
      await stores.runs.transition(run, { from: ['running'], set: { progress: 0.5 } });
      assert.deepEqual(await where(), ['running'], 'a transition that keeps the status keeps the run where it is');
      await stores.runs.transition(run, { from: ['running'], to: 'succeeded' });
      assert.deepEqual(await where(), ['succeeded']);
      assert.equal((await stores.runs.transition(run, { from: ['running'], to: 'failed' })).ok, false);
      assert.deepEqual(await where(), ['succeeded'], 'a refused transition moves nothing');
    });
  });
});
