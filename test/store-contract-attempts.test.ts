import assert from 'node:assert/strict';
import { mergeAttempt } from '../models/attempt-history.js';
import type { AttemptRecord, AttemptWrite, RunRecord } from '../models/types.js';
import { newRunSpec } from './helpers/harness.js';
import { describeEachStore } from './helpers/store-targets.js';

const at = (s: number) => `2026-01-01T00:00:0${s}.000Z`;
const lost = { code: 'worker_lost', message: 'the worker was lost', retryable: true };

/** The writes a run's attempts make: lease start, a lost attempt, a start never sent (dropped), a start after a lost gateway, the end. */
const WRITES: AttemptWrite[] = [
  { attempt: 1, worker: 'wkr_a', tier: 'open', started_at: at(1), ended_at: null, error: null },
  { attempt: 1, ended_at: at(2), error: { ...lost, attempt: 1 } },
  { attempt: 2, worker: 'wkr_b', tier: 'trusted', started_at: at(3), ended_at: null, error: null },
  { attempt: 2, drop: true },
  { attempt: 2, worker: 'wkr_b', tier: 'trusted', started_at: at(4), ended_at: null, error: null },
  // Attempt 2's gateway died (nobody ended it): the start of 3 ends it worker_lost.
  { attempt: 3, worker: 'wkr_a', tier: 'open', started_at: at(5), ended_at: null, error: null },
  { attempt: 3, ended_at: at(6), error: null },
];

/**
 * The store contract (store-contract.test.ts) for a run's attempt history (docs/jobs.md,
 * "Attempts"): written by the transition that moves the run, in the same step, merged by attempt
 * number as `mergeAttempt` says; a refused transition writes none of it.
 */
describe('store contract: attempt history', () => {
  it('mergeAttempt: starts, ends, drops, and a start ends an earlier attempt left open', () => {
    const history = WRITES.reduce<AttemptRecord[]>((h, w) => mergeAttempt(h, w), []);
    assert.deepEqual(history, [
      { attempt: 1, worker: 'wkr_a', tier: 'open', started_at: at(1), ended_at: at(2), error: { ...lost, attempt: 1 } },
      { attempt: 2, worker: 'wkr_b', tier: 'trusted', started_at: at(4), ended_at: at(5), error: { code: 'worker_lost', message: 'the lease was lost with its gateway', retryable: true, attempt: 2 } },
      { attempt: 3, worker: 'wkr_a', tier: 'open', started_at: at(5), ended_at: at(6), error: null },
    ]);
    assert.deepEqual(mergeAttempt([], { attempt: 4, ended_at: at(7), error: null }), [{ attempt: 4, worker: null, tier: null, started_at: null, ended_at: at(7), error: null }], 'an end with no start is added');
  });

  describeEachStore((stores) => {
    const queuedRun = async (fields: Partial<RunRecord> = {}): Promise<RunRecord> => {
      const a = await stores.accounts.create({ name: 'a', credits: 100 });
      const created = await stores.runs.create({ ...newRunSpec(a.id), ...fields });
      return created.outcome === 'created' ? created.run : assert.fail();
    };

    it('a new run has no attempt yet, and keeps its max_attempts and retry_on_timeout', async () => {
      const plain = await queuedRun();
      assert.deepEqual([plain.attempt_history, plain.max_attempts, plain.retry_on_timeout], [[], null, false]);
      const asked = await queuedRun({ max_attempts: 5, retry_on_timeout: true });
      assert.deepEqual([asked.max_attempts, asked.retry_on_timeout], [5, true]);
      const read = (await stores.runs.get(asked.run_id))!;
      assert.deepEqual([read.attempt_history, read.max_attempts, read.retry_on_timeout], [[], 5, true]);
    });

    it('each transition merges its attempt entry in the same step, as mergeAttempt does; a refused one writes none', async () => {
      const run = await queuedRun();
      let expected: AttemptRecord[] = [];
      for (const w of WRITES) {
        const starting = w.started_at !== undefined;
        const t = await stores.runs.transition(run, { from: ['queued', 'running'], to: starting ? 'running' : 'queued', attempt: w });
        assert.ok(t.ok);
        expected = mergeAttempt(expected, w);
        assert.deepEqual(t.run.attempt_history, expected, JSON.stringify(w));
      }
      assert.deepEqual((await stores.runs.get(run.run_id))!.attempt_history, expected, 'as stored');
      const refused = await stores.runs.transition(run, { from: ['running'], to: 'failed', attempt: { attempt: 9, ended_at: at(9), error: null } });
      assert.equal(refused.ok, false);
      assert.deepEqual((await stores.runs.get(run.run_id))!.attempt_history, expected, 'a refused transition writes no entry');
      const dropped = await stores.runs.transition(run, { from: ['queued'], attempt: { attempt: 1, drop: true } });
      assert.ok(dropped.ok);
      await stores.runs.transition(run, { from: ['queued'], attempt: { attempt: 2, drop: true } });
      const last = await stores.runs.transition(run, { from: ['queued'], attempt: { attempt: 3, drop: true } });
      assert.deepEqual(last.run?.attempt_history, [], 'dropping every entry leaves an empty list, not an object');
    });
  });
});
