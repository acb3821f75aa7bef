import assert from 'node:assert/strict';
import type { BatchRecord } from '../models/batch-types.js';
import { newBatchId } from '../models/ids.js';
import type { NewRun } from '../models/types.js';
import { newRunSpec } from './helpers/harness.js';
import { listAll } from './helpers/many-runs.js';
import { describeEachStore } from './helpers/store-targets.js';

/**
 * The store contract (store-contract.test.ts) for batches (docs/jobs.md, "Batches"): a batch
 * and all of its runs are created with their total reserved in one atomic step, or nothing is.
 */
describe('store contract: batches', () => {
  describeEachStore((stores) => {
    const batchOf = (accountId: string, runs: NewRun[]): BatchRecord => ({
      batch_id: newBatchId(accountId),
      account_id: accountId,
      created_at: new Date().toISOString(),
      run_ids: runs.map((r) => r.run_id),
      price: runs.reduce((s, r) => s + r.price, 0),
      idempotency_key: null,
    });

    it('creates the batch and every run, reserving the total, each run unconfirmed and listed by batch', async () => {
      const a = await stores.accounts.create({ name: 'a', credits: 100 });
      const alone = newRunSpec(a.id, { price: 1 });
      await stores.runs.create(alone);
      const runs = Array.from({ length: 7 }, () => newRunSpec(a.id, { price: 3 }));
      const batch = batchOf(a.id, runs);
      const result = await stores.runs.createBatch(batch, runs);
      assert.equal(result.outcome, 'created');
      if (result.outcome !== 'created') return;
      assert.deepEqual(result.runs.map((r) => r.run_id), batch.run_ids);
      assert.ok(result.runs.every((r) => r.batch_id === batch.batch_id && r.status === 'queued' && r.settlement === 'reserved'));
      // The fair-share step grows with the account's runs in flight, within the batch too (step 3).
      assert.deepEqual(result.runs.map((r) => r.priority - runs[0].priorityBase), [0, 0, 1, 1, 1, 2, 2]);
      const account = (await stores.accounts.get(a.id))!;
      assert.deepEqual([account.credits, account.reserved], [100 - 1 - 21, 22]);
      assert.equal((await stores.runs.get(batch.run_ids[3]))?.batch_id, batch.batch_id);
      assert.deepEqual(await stores.runs.getBatch(batch.batch_id), batch);
      assert.equal((await stores.runs.batchMembers(batch)).length, 7);
      const listed = await listAll(stores.runs, a.id, { batch_id: batch.batch_id, limit: 2 });
      assert.deepEqual(new Set(listed.ids), new Set(batch.run_ids));
      assert.equal(listed.ids.length, 7);
      const unconfirmed = await stores.runs.listUnconfirmed(-60_000, 100);
      assert.ok(batch.run_ids.every((id) => unconfirmed.some((r) => r.run_id === id)), 'the reconciler finds every run');
    });

    it('creates nothing when the balance is short of the total, and nothing twice under one batch id', async () => {
      const a = await stores.accounts.create({ name: 'a', credits: 10 });
      const runs = Array.from({ length: 4 }, () => newRunSpec(a.id, { price: 3 }));
      const short = await stores.runs.createBatch(batchOf(a.id, runs), runs);
      assert.deepEqual(short, { outcome: 'insufficient_credits', available: 10 });
      assert.equal(await stores.runs.get(runs[0].run_id), null);
      assert.deepEqual((await listAll(stores.runs, a.id, { limit: 100 })).ids, []);
      const account = (await stores.accounts.get(a.id))!;
      assert.deepEqual([account.credits, account.reserved], [10, 0]);

      const three = runs.slice(0, 3);
      const batch = batchOf(a.id, three);
      assert.equal((await stores.runs.createBatch(batch, three)).outcome, 'created');
      const again = await stores.runs.createBatch(batch, three.map(() => newRunSpec(a.id, { price: 0 })));
      assert.deepEqual(again, { outcome: 'exists', batch });
      assert.equal((await stores.accounts.get(a.id))!.reserved, 9);
      const missing = await stores.runs.createBatch(batchOf('acct_01HZZZZZZZZZZZZZZZZZZZZZZZ', [newRunSpec('acct_01HZZZZZZZZZZZZZZZZZZZZZZZ')]), [newRunSpec('acct_01HZZZZZZZZZZZZZZZZZZZZZZZ')]);
      assert.equal(missing.outcome, 'no_account');
    });

    it('settles a batch run as any other and counts it by status', async () => {
      const a = await stores.accounts.create({ name: 'a', credits: 10 });
      const runs = [newRunSpec(a.id, { price: 2 }), newRunSpec(a.id, { price: 2 })];
      const batch = batchOf(a.id, runs);
      await stores.runs.createBatch(batch, runs);
      assert.equal((await stores.runs.transition({ run_id: runs[0].run_id, account_id: a.id }, { from: ['queued'], to: 'canceled' })).ok, true);
      const statuses = (await stores.runs.batchMembers(batch)).map((m) => m.status).sort();
      assert.deepEqual(statuses, ['canceled', 'queued']);
      assert.deepEqual((await listAll(stores.runs, a.id, { batch_id: batch.batch_id, status: 'queued', limit: 5 })).ids, [runs[1].run_id]);
      assert.equal((await stores.accounts.get(a.id))!.credits, 8);
    });
  });
});
