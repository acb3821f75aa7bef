import assert from 'node:assert/strict';
import { ObservedRunStore } from '../models/observed-run-store.js';
import { newRunId } from '../models/ids.js';
import type { RunTransition } from '../models/stores.js';
import type { RunRecord } from '../models/types.js';
import { newRunSpec } from './helpers/harness.js';
import { describeEachStore } from './helpers/store-targets.js';

/**
 * The store contract (store-contract.test.ts) for what a transition can do beyond the
 * compare-and-set: write only absent fields, report what it overwrote, skip reading the record
 * back. The lease path relies on these to start a run in one call without reading it first.
 */
describe('store contract: transition options', () => {
  describeEachStore((stores) => {
    const queuedRun = async (): Promise<RunRecord> => {
      const a = await stores.accounts.create({ name: 'a', credits: 100 });
      const created = await stores.runs.create(newRunSpec(a.id));
      return created.outcome === 'created' ? created.run : assert.fail();
    };

    it('writes setIfAbsent fields only where the run has no value yet, and lets set win a field named in both', async () => {
      const run = await queuedRun();
      const first = await stores.runs.transition(run, { from: ['queued'], to: 'running', setIfAbsent: { started_at: '2026-01-01T00:00:01.000Z', worker_id: 'wkr_a' } });
      assert.deepEqual([first.run?.started_at, first.run?.worker_id], ['2026-01-01T00:00:01.000Z', 'wkr_a'], 'absent: written');
      await stores.runs.transition(run, { from: ['running'], to: 'queued', set: { worker_id: null } });
      const again = await stores.runs.transition(run, { from: ['queued'], to: 'running', setIfAbsent: { started_at: '2026-01-01T00:00:02.000Z', worker_id: 'wkr_b' } });
      assert.equal(again.run?.started_at, '2026-01-01T00:00:01.000Z', 'present: kept');
      assert.equal(again.run?.worker_id, 'wkr_b', 'a scalar cleared to null counts as absent');
      await stores.runs.transition(run, { from: ['running'], set: { started_at: null } });
      const cleared = await stores.runs.transition(run, { from: ['running'], setIfAbsent: { started_at: '2026-01-01T00:00:03.000Z' } });
      assert.equal(cleared.run?.started_at, '2026-01-01T00:00:03.000Z', 'a field set to null counts as absent');
      const both = await stores.runs.transition(run, { from: ['running'], set: { progress: 0.25 }, setIfAbsent: { progress: 0.75 } });
      assert.equal(both.run?.progress, 0.25);
      const refused = await stores.runs.transition(run, { from: ['queued'], setIfAbsent: { finished_at: '2026-01-01T00:00:04.000Z' } });
      assert.equal(refused.ok, false);
      assert.equal((await stores.runs.get(run.run_id))?.finished_at, null, 'a refused transition writes nothing');
    });

    it('reports the fields it overwrote as they were before, and the record as it is after', async () => {
      const run = await queuedRun();
      const lease = (n: number, worker: string) =>
        ({
          from: ['queued', 'running'],
          to: 'running',
          set: { attempts: n, fence: n, worker_id: worker, progress: null },
          setIfAbsent: { started_at: `2026-01-01T00:00:0${n}.000Z` },
          returnPrior: true,
        }) satisfies RunTransition;
      const first = await stores.runs.transition(run, lease(1, 'wkr_a'));
      assert.ok(first.ok);
      assert.deepEqual(first.prior, { status: 'queued', worker_id: null, attempts: 0, fence: 0, started_at: null, progress: null });
      assert.deepEqual(first.run, await stores.runs.get(run.run_id));
      assert.deepEqual([first.run.status, first.run.attempts, first.run.fence, first.run.worker_id, first.run.started_at], ['running', 1, 1, 'wkr_a', '2026-01-01T00:00:01.000Z']);

      await stores.runs.transition(run, { from: ['running'], fence: 1, set: { progress: 0.5 } });
      // Leased again while still running on its record (its gateway was lost): every field had a value.
      const second = await stores.runs.transition(run, lease(2, 'wkr_b'));
      assert.ok(second.ok);
      assert.deepEqual(second.prior, { status: 'running', worker_id: 'wkr_a', attempts: 1, fence: 1, started_at: '2026-01-01T00:00:01.000Z', progress: 0.5 });
      assert.deepEqual([second.run.attempts, second.run.fence, second.run.worker_id, second.run.started_at, second.run.progress], [2, 2, 'wkr_b', '2026-01-01T00:00:01.000Z', null]);

      const plain = await stores.runs.transition(run, { from: ['running'], set: { progress: 0.1 } });
      assert.equal(plain.ok, true);
      assert.equal(plain.prior, undefined, 'not asked for, not reported');
    });

    it('returns the record, and no prior fields, when it refuses', async () => {
      const run = await queuedRun();
      await stores.runs.transition(run, { from: ['queued'], to: 'running', set: { fence: 1, worker_id: 'wkr_a' } });
      const current = await stores.runs.get(run.run_id);
      const byStatus = await stores.runs.transition(run, { from: ['queued'], to: 'running', set: { fence: 2 }, returnPrior: true });
      assert.deepEqual(byStatus, { ok: false, run: current });
      const byFence = await stores.runs.transition(run, { from: ['running'], fence: 2, set: { progress: 1 }, returnPrior: true });
      assert.deepEqual(byFence, { ok: false, run: current });
      assert.deepEqual(await stores.runs.transition({ run_id: newRunId(run.account_id), account_id: run.account_id }, { from: ['queued'], returnPrior: true }), { ok: false, run: null });
    });

    it('answers a lean transition with ok alone, and still with the record when it refuses', async () => {
      const run = await queuedRun();
      await stores.runs.transition(run, { from: ['queued'], to: 'running', set: { fence: 1 } });
      const lean = await stores.runs.transition(run, { from: ['running'], fence: 1, set: { progress: 0.5 }, returning: 'none' });
      assert.deepEqual(lean, { ok: true });
      if (lean.ok) {
        // @ts-expect-error the type says there is no record to read (typecheck fails if this line compiles)
        const record: RunRecord = lean.run;
        assert.equal(record, undefined);
      }
      const current = await stores.runs.get(run.run_id);
      assert.equal(current?.progress, 0.5, 'written all the same');
      const stale = await stores.runs.transition(run, { from: ['running'], fence: 2, set: { progress: 0.9 }, returning: 'none' });
      assert.deepEqual(stale, { ok: false, run: current });
      const gone = await stores.runs.transition({ run_id: newRunId(run.account_id), account_id: run.account_id }, { from: ['running'], returning: 'none' });
      assert.deepEqual(gone, { ok: false, run: null });
      const withPrior = await stores.runs.transition(run, { from: ['running'], set: { progress: 0.6 }, returning: 'none', returnPrior: true });
      assert.deepEqual(withPrior, { ok: true, prior: { status: 'running', worker_id: null, attempts: 0, fence: 1, started_at: null, progress: 0.5 } });
    });

    it('gives the status-change listeners of an observed store the full record, even if a lean reply is asked for', async () => {
      const observed = new ObservedRunStore(stores.runs);
      const heard: RunRecord[] = [];
      observed.onStatusChange((r) => void heard.push(r));
      const run = await queuedRun();
      await observed.transition(run, { from: ['queued'], to: 'running', set: { fence: 1 } });
      // A patch changes no status: no listener, so nothing needs the record.
      assert.deepEqual(await observed.transition(run, { from: ['running'], set: { progress: 0.5 }, returning: 'none' }), { ok: true });
      // The type forbids a lean reply with `to`; a caller getting round it still has the listeners fed.
      const lean = { from: ['running'], fence: 1, to: 'succeeded', returning: 'none' } as unknown as RunTransition;
      await observed.transition(run, lean);
      const final = await stores.runs.get(run.run_id);
      assert.deepEqual(
        heard.map((r) => r.status),
        ['running', 'succeeded'],
      );
      assert.deepEqual(heard[1], final);
      assert.equal(heard[1].progress, 0.5);
    });

    it('awaits its listeners unless told not to; either way it calls them before it returns', async () => {
      const observed = new ObservedRunStore(stores.runs);
      const called: string[] = [];
      let finish!: () => void;
      const slow = new Promise<void>((resolve) => (finish = resolve));
      observed.onStatusChange(async (r) => {
        called.push(r.status);
        await slow;
        called.push(`${r.status} done`);
      });
      const run = await queuedRun();
      const started = await observed.transition(run, { from: ['queued'], to: 'running', awaitListeners: false });
      assert.equal(started.ok, true);
      assert.deepEqual(called, ['running'], 'called, not waited for');
      const waited = observed.transition(run, { from: ['running'], to: 'succeeded' });
      let returned = false;
      void waited.then(() => (returned = true));
      await new Promise((r) => setImmediate(r));
      await stores.runs.get(run.run_id);
      assert.equal(returned, false, 'waits for its listener');
      finish();
      await waited;
      assert.deepEqual(called, ['running', 'succeeded', 'running done', 'succeeded done']);
    });
  });
});
