import assert from 'node:assert/strict';
import type { Job } from 'bullmq';
import type { BullWorkers } from '../dispatch/bull-workers.js';
import type { LeaseStore } from '../dispatch/lease-store.js';
import type { RunRecord } from '../models/types.js';
import type { QueuedJobData } from '../queues/job-queues.js';
import { TestGateway, cleanupPrefix, uniquePrefix } from './helpers/harness.js';
import { RawWorker } from './helpers/raw-worker.js';

/**
 * A lease that fails after its run was moved to `running` but before the lease went out is
 * undone: the run's record goes back to what it was before, from the fields the starting
 * transition reported, and its job to its queue without counting an attempt.
 */
describe('a lease that never reaches its worker', function () {
  this.timeout(30_000);
  const prefix = uniquePrefix('hand-back');
  const gw = new TestGateway(prefix, { HEARTBEAT_MS: '300', LEASE_TTL_MS: '3000' });
  let w: RawWorker | undefined;
  before(() => gw.start());
  after(async () => {
    w?.terminate();
    await gw.stop();
    await cleanupPrefix(prefix);
  });

  /**
   * Makes the next lease record write for `runId` fail, and resolves with the run's record as it
   * is when its job is handed back to its queue: after the undo, before any new lease.
   */
  const failNextLease = (runId: string): Promise<RunRecord | null> => {
    const internals = gw.dispatcher as unknown as { table: { opts: { records: LeaseStore } }; scheduler: { opts: { bull: BullWorkers } } };
    const leases = internals.table.opts.records;
    const { bull } = internals.scheduler.opts;
    const put = leases.put;
    const handBack = bull.handBack;
    return new Promise((resolve, reject) => {
      leases.put = async function (this: LeaseStore, ...args: Parameters<LeaseStore['put']>) {
        if (args[0].run_id !== runId) return put.apply(this, args);
        leases.put = put;
        bull.handBack = async function (this: BullWorkers, queue: string, job: Job<QueuedJobData>, token: string) {
          bull.handBack = handBack;
          await gw.stores.runs.get(runId).then(resolve, reject);
          return handBack.call(this, queue, job, token);
        };
        throw new Error('the lease store refused (test)');
      };
    });
  };

  it("restores the run's fields as they were before, on its first attempt and after an earlier one", async () => {
    const { key } = await gw.account(100);
    const { body } = await gw.submit(key, { kind: 'inference:image:generate', input: { prompt: 'undo me' } });
    const runId = body.run_id as string;
    const queued = (await gw.stores.runs.get(runId))!;
    assert.deepEqual([queued.status, queued.attempts, queued.fence, queued.started_at], ['queued', 0, 0, null]);

    // First attempt: the run had never started.
    const firstUndone = failNextLease(runId);
    w = await new RawWorker(gw.url, await gw.workerToken()).connect();
    assert.deepEqual(await firstUndone, queued, 'the record as it was before the failed lease');
    const first = await w.lease();
    assert.deepEqual([first.run_id, first.attempt, first.fence], [runId, 1, 1], 'the failed lease counted no attempt');
    assert.equal((await w.report(first, { type: 'progress', progress: 0.5 })).type, 'ack');
    const running = (await gw.stores.runs.get(runId))!;
    assert.ok(running.started_at, 'started');
    assert.deepEqual([running.status, running.attempts, running.fence, running.progress], ['running', 1, 1, 0.5]);
    assert.ok(running.worker_id);

    // Second attempt: the run has a start time, an attempt and a fence of its own to get back.
    const secondUndone = failNextLease(runId);
    await w.report(first, { type: 'fail', error: { code: 'oom', message: 'out of memory', retryable: true } });
    const undone = (await secondUndone)!;
    // The first attempt's entry ended with its failure; the second's, never sent, is gone.
    assert.deepEqual(undone.attempt_history.map((a) => [a.attempt, a.error?.code]), [[1, 'engine_error']]);
    assert.deepEqual({ ...undone, attempt_history: [] }, { ...running, status: 'queued', worker_id: null, progress: null, timeout_at: null, attempt_history: [] });
    const second = await w.lease();
    assert.deepEqual([second.run_id, second.attempt, second.fence], [runId, 2, 2]);
    assert.equal((await w.complete(second)).type, 'ack');
    const done = (await gw.stores.runs.get(runId))!;
    assert.deepEqual([done.status, done.attempts, done.started_at], ['succeeded', 2, running.started_at], 'the first start time is kept');
  });
});
