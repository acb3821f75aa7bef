import assert from 'node:assert/strict';
import { newBatchId } from '../models/ids.js';
import { reservation, unitCost, type UnitRate } from '../models/pricing.js';
import type { RunRecord } from '../models/types.js';
import { newRunSpec } from './helpers/harness.js';
import { describeEachStore } from './helpers/store-targets.js';

/**
 * The store contract for usage-based cost (docs/jobs.md, "Cost"): the terminal transition that
 * makes a run succeed charges the cost of the usage set with it at the run's rate, never more
 * than was reserved, and returns the rest, in the same step; a failure charges nothing; a
 * monthly budget refuses a create past it. Every store must agree, to the credit.
 */
const RATE: UnitRate = { base: 2, per_1k_input_tokens: 150, per_1k_output_tokens: 600, per_second: 3, per_image: 5, max: 400 };

describe('store contract: cost', () => {
  describeEachStore((stores) => {
    const running = async (price: number, rate: UnitRate | null, credits = 1000, createdAt = new Date().toISOString()) => {
      const a = await stores.accounts.create({ name: 'a', credits });
      const created = await stores.runs.create(newRunSpec(a.id, { price, rate, created_at: createdAt }));
      const run = created.outcome === 'created' ? created.run : assert.fail(created.outcome);
      await stores.runs.transition(run, { from: ['queued'], to: 'running' });
      return { run, account: a.id };
    };
    const account = async (id: string) => {
      const a = (await stores.accounts.get(id))!;
      return [a.credits, a.reserved, a.in_flight];
    };
    const succeed = (run: RunRecord, usage?: RunRecord['usage'], finished = new Date().toISOString()) =>
      stores.runs.transition(run, { from: ['running'], to: 'succeeded', set: { output: { urls: [] }, finished_at: finished, ...(usage && { usage }) } });

    it('keeps the rate with the run and charges the usage at it, returning the rest of the reservation', async () => {
      const { run, account: id } = await running(100, RATE);
      assert.deepEqual(run.rate, RATE);
      assert.deepEqual((await stores.runs.get(run.run_id))!.rate, RATE);
      const usage = { input_tokens: 1234, output_tokens: 77, seconds: 2.2, images: 1 };
      const t = await succeed(run, usage);
      // 2 + ceil((1234 × 150 + 77 × 600) / 1000) + ceil(2.2) × 3 + 1 × 5 = 2 + 232 + 9 + 5
      assert.equal(unitCost(RATE, usage), 248);
      // ...capped at the price reserved: 100.
      assert.equal(t.run?.charged, 100);
      assert.deepEqual(t.run?.usage, usage);
      assert.equal(t.run?.settlement, 'charged');
      assert.deepEqual(await account(id), [900, 0, 0]);
    });

    it('charges what the usage costs when it is less than the reservation, to the credit', async () => {
      const { run, account: id } = await running(300, RATE);
      const t = await succeed(run, { input_tokens: 10, output_tokens: 5 });
      // 2 + ceil((1500 + 3000) / 1000) = 7
      assert.equal(t.run?.charged, 7);
      assert.deepEqual(await account(id), [993, 0, 0]);
      // A second report of the same end charges nothing more.
      await succeed(run, { input_tokens: 1, output_tokens: 1 });
      assert.deepEqual(await account(id), [993, 0, 0]);
      assert.equal((await stores.runs.get(run.run_id))!.charged, 7);
    });

    it('charges the whole reservation when the worker reports no usage, or the price is fixed', async () => {
      const perUnit = await running(40, RATE);
      assert.equal((await succeed(perUnit.run)).run?.charged, 40);
      assert.deepEqual(await account(perUnit.account), [960, 0, 0]);
      const fixed = await running(4, null);
      assert.equal((await succeed(fixed.run, { images: 9 })).run?.charged, 4);
      assert.deepEqual(await account(fixed.account), [996, 0, 0]);
    });

    it('charges a failed or canceled run nothing', async () => {
      for (const to of ['failed', 'canceled'] as const) {
        const { run, account: id } = await running(50, RATE);
        const t = await stores.runs.transition(run, { from: ['running'], to, set: { error: { code: 'x', message: 'x', retryable: false }, finished_at: new Date().toISOString() } });
        assert.equal(t.run?.charged, 0);
        assert.equal(t.run?.settlement, 'released');
        assert.deepEqual(await account(id), [1000, 0, 0]);
      }
    });

    it('refuses a create past the monthly budget, counting what is reserved and what the month spent', async () => {
      const a = await stores.accounts.create({ name: 'b', credits: 1000 });
      await stores.accounts.setBudget(a.id, 30);
      const create = (price: number, createdAt: string) => stores.runs.create(newRunSpec(a.id, { price, rate: RATE, created_at: createdAt }));
      const first = await create(20, '2031-05-10T00:00:00.000Z');
      assert.equal(first.outcome, 'created');
      assert.deepEqual(await create(11, '2031-05-10T00:00:01.000Z'), { outcome: 'budget_exceeded', budget: 30, spent: 0, reserved: 20 });
      const run = first.outcome === 'created' ? first.run : assert.fail();
      await stores.runs.transition(run, { from: ['queued'], to: 'running' });
      await succeed(run, { output_tokens: 10 }, '2031-05-11T00:00:00.000Z'); // 2 + 6 = 8
      assert.deepEqual(await create(23, '2031-05-12T00:00:00.000Z'), { outcome: 'budget_exceeded', budget: 30, spent: 8, reserved: 0 });
      const acct = (await stores.accounts.get(a.id))!;
      assert.deepEqual([acct.credits, acct.reserved, acct.in_flight, acct.spent, acct.spent_period, acct.budget], [992, 0, 0, 8, '2031-05', 30]);
      assert.equal((await create(22, '2031-05-12T00:00:01.000Z')).outcome, 'created');
      // June: May's spending is no part of it; only what is reserved counts.
      assert.deepEqual(await create(9, '2031-06-01T00:00:00.000Z'), { outcome: 'budget_exceeded', budget: 30, spent: 0, reserved: 22 });
      assert.equal((await create(8, '2031-06-01T00:00:01.000Z')).outcome, 'created');
      await stores.accounts.setBudget(a.id, null);
      assert.equal((await create(500, '2031-06-02T00:00:00.000Z')).outcome, 'created');
    });

    it('judges a batch by its total against the budget, creating all of it or nothing', async () => {
      const a = await stores.accounts.create({ name: 'c', credits: 1000 });
      await stores.accounts.setBudget(a.id, 10);
      const createdAt = '2031-07-01T00:00:00.000Z';
      const batch = (prices: number[]) => {
        const runs = prices.map((price) => newRunSpec(a.id, { price, rate: RATE, created_at: createdAt }));
        return stores.runs.createBatch({ batch_id: newBatchId(a.id), account_id: a.id, created_at: createdAt, run_ids: runs.map((r) => r.run_id), price: prices.reduce((x, y) => x + y, 0), idempotency_key: null }, runs);
      };
      assert.deepEqual(await batch([6, 6]), { outcome: 'budget_exceeded', budget: 10, spent: 0, reserved: 0 });
      assert.deepEqual(await account(a.id), [1000, 0, 0], 'a refused batch holds nothing');
      const made = await batch([4, 6]);
      assert.equal(made.outcome, 'created');
      assert.deepEqual(made.outcome === 'created' && made.runs.map((r) => [r.price, r.rate]), [[4, RATE], [6, RATE]]);
      assert.deepEqual(await account(a.id), [990, 10, 2]);
    });
  });
});

describe('pricing', () => {
  it('reserves from the input bounds, capped by the kind maxima, and the kind maximum without a bound', () => {
    const llm: UnitRate = { base: 1, per_1k_input_tokens: 1000, per_1k_output_tokens: 1000, max_output_tokens: 100, max: 1000 };
    assert.equal(reservation('inference:llm:text-generate', llm, { prompt: 'abc', max_tokens: 10 }), 1 + 3 + 10);
    assert.equal(reservation('inference:llm:text-generate', llm, { prompt: 'abc', max_tokens: 5000 }), 1 + 3 + 100, 'max_output_tokens caps max_tokens');
    assert.equal(reservation('inference:llm:text-generate', llm, { messages: [{ role: 'user', content: 'hé' }] }), 1 + Buffer.byteLength('[{"role":"user","content":"hé"}]') + 100);
    const noCap: UnitRate = { base: 1, per_1k_output_tokens: 1000, max: 70 };
    assert.equal(reservation('inference:llm:text-generate', noCap, { prompt: 'x' }), 70, 'no max_tokens and no max_output_tokens: the kind max');
    assert.equal(reservation('inference:image:generate', { base: 1, per_image: 3, max_images: 4 }, { prompt: 'x' }), 4, 'the image kind makes one image');
    assert.equal(reservation('inference:image:generate', 9, { prompt: 'x' }), 9);
  });
});
