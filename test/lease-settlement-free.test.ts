import assert from 'node:assert/strict';
import { Job } from 'bullmq';
import type { Engine } from '../sdk/engines/types.js';
import { silentLogger } from '../sdk/worker/logger.js';
import { SwitchyardWorker } from '../sdk/worker/switchyard-worker.js';
import { TestGateway, cleanupPrefix, uniquePrefix, until } from './helpers/harness.js';

/**
 * A worker's slot is free for its next job as soon as the run's success is recorded: BullMQ's
 * job is finished after, and the next lease does not wait for it (nor for the lease record's
 * deletion). The run record is the truth; a job left unfinished is dropped when next leased.
 */
describe('LeaseSettlement: a slot freed by a success', function () {
  const prefix = uniquePrefix('free');
  const gw = new TestGateway(prefix);
  let worker: SwitchyardWorker;
  const started: string[] = [];
  const original = Job.prototype.moveToCompleted;
  let holdFinish!: () => void;
  const finishHeld = new Promise<void>((resolve) => (holdFinish = resolve));
  let finishing = 0;

  before(async () => {
    await gw.start();
    const handler = (async (_kind, input) => (started.push(String(input.prompt)), { artifacts: [] })) as Engine;
    worker = new SwitchyardWorker({ gateway: gw.url, token: await gw.workerToken(), kinds: ['inference:image:generate'], slots: 1, handler, logger: silentLogger });
    await worker.start();
  });
  after(async () => {
    Job.prototype.moveToCompleted = original;
    holdFinish();
    await worker.stop();
    await gw.stop();
    await cleanupPrefix(prefix);
  });

  it("leases the next job to a one-slot worker while the last one's BullMQ job is still being finished", async () => {
    // Every BullMQ completion waits until the test lets it go.
    Job.prototype.moveToCompleted = async function (this: Job, ...args: Parameters<Job['moveToCompleted']>) {
      finishing++;
      await finishHeld;
      return original.apply(this, args);
    };
    const { key } = await gw.account();
    const first = await gw.submit(key, { kind: 'inference:image:generate', input: { prompt: 'first' } });
    const second = await gw.submit(key, { kind: 'inference:image:generate', input: { prompt: 'second' } });
    assert.deepEqual([first.status, second.status], [202, 202]);
    await until('the second job runs', async () => started.includes('second'));
    assert.ok(finishing >= 1, "the first job's BullMQ completion had started");
    assert.equal((await gw.stores.runs.get(first.body.run_id))?.status, 'succeeded');
    holdFinish();
    await until('both runs succeeded', async () => (await gw.stores.runs.get(second.body.run_id))?.status === 'succeeded');
    Job.prototype.moveToCompleted = original;
  });
});
