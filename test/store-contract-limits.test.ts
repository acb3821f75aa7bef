import assert from 'node:assert/strict';
import { mintSecret } from '../models/credentials.js';
import { newRunSpec } from './helpers/harness.js';
import { describeEachStore } from './helpers/store-targets.js';

/**
 * The store contract (store-contract.test.ts) for fair shares and concurrency limits
 * (docs/jobs.md, "Limits and fairness"): the rank a create gives, the per-kind count a terminal
 * run takes back, and the limits and weights accounts and keys keep.
 */
describe('store contract: limits and fair shares', () => {
  describeEachStore((stores) => {
    it("ranks by the account's runs of the job's kind in flight, per share of its weight, and counts a terminal run out", async () => {
      const a = await stores.accounts.create({ name: 'a', credits: 100 });
      assert.ok(await stores.accounts.setLimits(a.id, { weight: 2 }));
      const rank = async (kind = 'inference:image:generate') => {
        const r = await stores.runs.create(newRunSpec(a.id, { priorityBase: 10, price: 1, kind }));
        return r.outcome === 'created' ? r.run : assert.fail();
      };
      const runs = [];
      for (let i = 0; i < 7; i++) runs.push(await rank());
      // Step 3 × weight 2: six runs a rank.
      assert.deepEqual(runs.map((r) => r.priority), [10, 10, 10, 10, 10, 10, 11]);
      assert.equal((await rank('inference:rig')).priority, 10, 'another kind counts apart');
      assert.equal((await stores.runs.transition(runs[0], { from: ['queued'], to: 'canceled' })).ok, true);
      assert.equal((await rank()).priority, 11, 'seven of the kind in flight');
      assert.equal((await stores.runs.transition(runs[1], { from: ['queued'], to: 'canceled' })).ok, true);
      assert.equal((await stores.runs.transition(runs[2], { from: ['queued'], to: 'canceled' })).ok, true);
      assert.equal((await rank()).priority, 10, 'six of the kind in flight');
    });

    it("keeps an account's limits and weight, and an API key's max_running", async () => {
      const a = await stores.accounts.create({ name: 'a', credits: 0 });
      assert.deepEqual([a.weight, a.max_running, a.max_running_by_kind], [1, null, {}]);
      await stores.accounts.setLimits(a.id, { max_running: 5, max_running_by_kind: { 'inference:rig': 2, 'inference:image:generate': 3 }, weight: 4 });
      const set = await stores.accounts.setLimits(a.id, { max_running_by_kind: { 'inference:rig': null } });
      assert.deepEqual([set?.weight, set?.max_running, set?.max_running_by_kind], [4, 5, { 'inference:image:generate': 3 }]);
      const cleared = await stores.accounts.setLimits(a.id, { max_running: null });
      assert.equal(cleared?.max_running, null);
      assert.deepEqual((await stores.accounts.get(a.id))?.max_running_by_kind, { 'inference:image:generate': 3 });
      assert.equal(await stores.accounts.setLimits('acct_01M8JTKYD3KREB5A4XAET4V30T', { weight: 2 }), null);
      const { lookupId } = mintSecret('sy');
      const record = { id: `key_${lookupId}`, account_id: a.id, prefix: 'sy_abcdefgh', name: null, hash: 'ab'.repeat(32), created_at: new Date().toISOString(), revoked_at: null, max_running: null };
      await stores.apiKeys.insert(record, lookupId);
      const b = await stores.accounts.create({ name: 'b', credits: 0 });
      assert.equal(await stores.apiKeys.setMaxRunning(b.id, record.id, 2), null, "not another account's");
      assert.equal((await stores.apiKeys.setMaxRunning(a.id, record.id, 2))?.max_running, 2);
      assert.equal((await stores.apiKeys.findByLookupId(lookupId))?.max_running, 2);
      assert.equal((await stores.apiKeys.setMaxRunning(a.id, record.id, null))?.max_running, null);
    });
  });
});
