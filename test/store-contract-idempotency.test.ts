import assert from 'node:assert/strict';
import type { BatchRecord } from '../models/batch-types.js';
import { newBatchId, newRunId } from '../models/ids.js';
import { newRunSpec } from './helpers/harness.js';
import { describeEachStore } from './helpers/store-targets.js';

/**
 * The store contract (store-contract.test.ts) for Idempotency-Key claims: one claim per key,
 * and a claim and the create of the run (or batch) it names exclude each other, so a key
 * never ends up naming two records (docs/reliability.md, "Chaos").
 */
describe('store contract: idempotency', () => {
  describeEachStore((stores) => {
    it('claims a key once and returns the first claim afterwards', async () => {
      const first = await stores.idempotency.claim('acct_1', 'key-1', 'fp-a', 'run_A', 60_000);
      assert.deepEqual(first, { runId: 'run_A', fingerprint: 'fp-a', claimed: true });
      const second = await stores.idempotency.claim('acct_1', 'key-1', 'fp-b', 'run_B', 60_000);
      assert.deepEqual(second, { runId: 'run_A', fingerprint: 'fp-a', claimed: false });
      const otherAccount = await stores.idempotency.claim('acct_2', 'key-1', 'fp-b', 'run_C', 60_000);
      assert.equal(otherAccount.claimed, true, 'keys are per account');
    });

    it('gives exactly one winner among concurrent claims', async () => {
      const claims = await Promise.all(Array.from({ length: 20 }, (_, i) => stores.idempotency.claim('acct_1', 'race', 'fp', `run_${i}`, 60_000)));
      assert.equal(claims.filter((c) => c.claimed).length, 1);
      assert.equal(new Set(claims.map((c) => c.runId)).size, 1);
    });

    // Run ids as the gateway mints them: on a cluster one carries its account's group (models/ids.ts).
    const [runA, runB, runC] = [newRunId('acct_1'), newRunId('acct_1'), newRunId('acct_1')];

    it('releases only a claim that still names the run', async () => {
      await stores.idempotency.claim('acct_1', 'rel', 'fp', runA, 60_000);
      await stores.idempotency.release('acct_1', 'rel', runB);
      assert.equal((await stores.idempotency.claim('acct_1', 'rel', 'fp', runC, 60_000)).runId, runA);
      await stores.idempotency.release('acct_1', 'rel', runA);
      assert.equal((await stores.idempotency.claim('acct_1', 'rel', 'fp', runC, 60_000)).claimed, true);
    });

    it('forgets a claim after its time to live', async () => {
      await stores.idempotency.claim('acct_1', 'ttl', 'fp', runA, 50);
      await new Promise((r) => setTimeout(r, 120));
      assert.equal((await stores.idempotency.claim('acct_1', 'ttl', 'fp', runB, 60_000)).claimed, true);
    });

    const credits = async (accountId: string) => (await stores.accounts.get(accountId))!.credits;

    it('makes a keyed run only while the key\'s claim names it', async () => {
      const a = await stores.accounts.create({ name: 'a', credits: 100 });
      const lost = newRunSpec(a.id, { idempotency_key: 'k-lost' });
      await stores.idempotency.claim(a.id, 'k-lost', 'fp', lost.run_id, 60_000);
      await stores.idempotency.release(a.id, 'k-lost', lost.run_id);
      assert.deepEqual(await stores.runs.create(lost), { outcome: 'claim_lost' }, 'released: nothing is made');
      const taken = newRunSpec(a.id, { idempotency_key: 'k-lost' });
      await stores.idempotency.claim(a.id, 'k-lost', 'fp', taken.run_id, 60_000);
      assert.deepEqual(await stores.runs.create(lost), { outcome: 'claim_lost' }, 'claimed by another: nothing is made');
      assert.equal(await stores.runs.get(lost.run_id), null);
      assert.equal(await credits(a.id), 100, 'nothing was reserved');
      assert.equal((await stores.runs.create(taken)).outcome, 'created', 'the claim\'s own run is made');
      assert.equal((await stores.runs.create(taken)).outcome, 'exists');
    });

    it('never releases a claim whose run was made', async () => {
      const a = await stores.accounts.create({ name: 'a', credits: 100 });
      const run = newRunSpec(a.id, { idempotency_key: 'k-made' });
      await stores.idempotency.claim(a.id, 'k-made', 'fp', run.run_id, 60_000);
      assert.equal((await stores.runs.create(run)).outcome, 'created');
      await stores.idempotency.release(a.id, 'k-made', run.run_id);
      assert.deepEqual(await stores.idempotency.claim(a.id, 'k-made', 'fp', newRunId(a.id), 60_000), { runId: run.run_id, fingerprint: 'fp', claimed: false });
    });

    it('leaves a key naming one run or none when releases race creates', async () => {
      const a = await stores.accounts.create({ name: 'a', credits: 1000 });
      for (let i = 0; i < 25; i++) {
        const key = `k-race-${i}`;
        const run = newRunSpec(a.id, { idempotency_key: key, price: 1 });
        await stores.idempotency.claim(a.id, key, 'fp', run.run_id, 60_000);
        const [made] = await Promise.all([stores.runs.create(run), stores.idempotency.release(a.id, key, run.run_id)]);
        const claim = await stores.idempotency.claim(a.id, key, 'fp', newRunId(a.id), 60_000);
        if (made.outcome === 'created') assert.equal(claim.runId, run.run_id, 'a made run keeps its claim');
        else assert.deepEqual([made.outcome, claim.claimed], ['claim_lost', true], 'a released key is free and names no run');
      }
    });

    it('makes a keyed batch only while the key\'s claim names it, and keeps a made batch\'s claim', async () => {
      const a = await stores.accounts.create({ name: 'a', credits: 100 });
      const batchOf = (key: string): [BatchRecord, ReturnType<typeof newRunSpec>[]] => {
        const runs = [newRunSpec(a.id, { price: 2 }), newRunSpec(a.id, { price: 3 })];
        return [{ batch_id: newBatchId(a.id), account_id: a.id, created_at: new Date().toISOString(), run_ids: runs.map((r) => r.run_id), price: 5, idempotency_key: key }, runs];
      };
      const [lost, lostRuns] = batchOf('b-lost');
      await stores.idempotency.claim(a.id, 'b-lost', 'fp', lost.batch_id, 60_000);
      await stores.idempotency.release(a.id, 'b-lost', lost.batch_id);
      assert.deepEqual(await stores.runs.createBatch(lost, lostRuns), { outcome: 'claim_lost' });
      assert.equal(await stores.runs.getBatch(lost.batch_id), null);
      assert.equal(await stores.runs.get(lostRuns[0].run_id), null);
      assert.equal(await credits(a.id), 100);
      const [made, madeRuns] = batchOf('b-made');
      await stores.idempotency.claim(a.id, 'b-made', 'fp', made.batch_id, 60_000);
      assert.equal((await stores.runs.createBatch(made, madeRuns)).outcome, 'created');
      await stores.idempotency.release(a.id, 'b-made', made.batch_id);
      assert.equal((await stores.idempotency.claim(a.id, 'b-made', 'fp', newBatchId(a.id), 60_000)).runId, made.batch_id);
    });
  });
});
