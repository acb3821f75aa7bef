import assert from 'node:assert/strict';
import type { CreateAndEnqueue } from '../queues/create-and-enqueue.js';
import type { RunStore } from '../models/stores.js';
import { TestGateway, cleanupPrefix, uniquePrefix, until } from './helpers/harness.js';
import { RawWorker } from './helpers/raw-worker.js';
import { dataUri, samplePng } from './helpers/sample-files.js';

const KIND = 'inference:3d:image-to-mesh';

/**
 * A create whose answer is lost to a reconnect is sent again by ioredis, and the second answer
 * says the run exists. Without an Idempotency-Key the run id is the request's own, so the run
 * found is the one this request made: it keeps the input files just staged for it and is
 * queued, answered 202 like any new run (with a key, the run found is an earlier request's, and
 * the files staged again are dropped: test/credits-and-idempotency.test.ts tests that path).
 */
describe('JobService: a create sent twice by the client library', function () {
  this.timeout(30_000);
  const prefix = uniquePrefix('resent-create');
  let gw: TestGateway;

  before(async () => {
    gw = await new TestGateway(prefix).start();
  });
  after(async () => {
    await gw.stop();
    await cleanupPrefix(prefix);
  });

  /** Makes every create run twice, the caller seeing the second answer (`exists`), as after a resend. */
  function createTwice(): () => void {
    const jobs = gw.services.jobs as unknown as { opts: { intake?: Pick<CreateAndEnqueue, 'submit'>; runs: RunStore } };
    const { intake, runs } = jobs.opts;
    const restore: Array<() => void> = [];
    if (intake) {
      const submit = intake.submit.bind(intake);
      intake.submit = async (run, gate) => {
        await submit(run, gate);
        return submit(run, gate);
      };
      restore.push(() => (intake.submit = submit));
    }
    const create = runs.create.bind(runs);
    runs.create = async (run) => {
      await create(run);
      return create(run);
    };
    restore.push(() => (runs.create = create));
    return () => restore.forEach((r) => r());
  }

  it('keeps the run it made, with its staged input file, queued and leased once', async () => {
    const { key } = await gw.account(100);
    const png = samplePng(8, 7);
    const restore = createTwice();
    let res;
    try {
      res = await gw.submit(key, { kind: KIND, input: { image: dataUri('image/png', png) } });
    } finally {
      restore();
    }
    assert.equal(res.status, 202, res.text);
    const run = await gw.stores.runs.get(res.body.run_id);
    const staged = run?.input_files.image;
    assert.ok(staged, 'the run records its staged file');
    assert.ok(await gw.services.artifacts.get(staged.artifact_id), 'the staged file is kept');

    const w = await new RawWorker(gw.url, await gw.workerToken()).connect({ kinds: [KIND] });
    const lease = await w.lease();
    assert.equal(lease.run_id, res.body.run_id);
    assert.equal((await w.complete(lease)).type, 'ack');
    await until('the run to succeed', async () => (await gw.stores.runs.get(res.body.run_id))?.status === 'succeeded');
    const account = await gw.stores.accounts.get(run!.account_id);
    assert.equal(account?.in_flight, 0);
    w.terminate();
  });
});
