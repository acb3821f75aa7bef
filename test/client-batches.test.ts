import assert from 'node:assert/strict';
import { SwitchyardBadRequestError, SwitchyardClient, SwitchyardInsufficientCreditsError, SwitchyardNotFoundError, type BatchEvent } from '../sdk/client/index.js';
import { createDemoEngine } from '../sdk/engines/demo/index.js';
import { SwitchyardWorker, silentLogger } from '../sdk/worker/index.js';
import { TestGateway, cleanupPrefix, uniquePrefix } from './helpers/harness.js';

const KIND = 'inference:image:generate';

describe('client library (sdk/client): batches', function () {
  this.timeout(30_000);
  const prefix = uniquePrefix('client-batches');
  let gw: TestGateway;
  let worker: SwitchyardWorker;
  let client: SwitchyardClient;

  before(async () => {
    gw = await new TestGateway(prefix).start();
    const { key } = await gw.account(10_000);
    worker = new SwitchyardWorker({ gateway: gw.url, token: await gw.accountWorkerToken(key), kinds: [KIND], slots: 4, handler: createDemoEngine({ delayMs: 0 }), logger: silentLogger, progressIntervalMs: 0 });
    await worker.start();
    client = new SwitchyardClient({ baseUrl: gw.url, apiKey: key });
  });
  after(async () => {
    await worker?.stop({ timeoutMs: 0 });
    await gw?.stop();
    await cleanupPrefix(prefix);
  });

  it('submits a batch, follows it over one stream to done, lists and reads it', async () => {
    const jobs = Array.from({ length: 6 }, (_, i) => ({ kind: KIND, input: { prompt: `chair ${i}` } }));
    const batch = await client.submitBatch(jobs, { idempotencyKey: 'client-batch-1' });
    assert.equal(batch.size, 6);
    assert.equal(batch.jobs.length, 6);
    assert.equal(batch.replayed, false);
    const events: BatchEvent[] = [];
    for await (const ev of client.streamBatch(batch.batch_id)) events.push(ev);
    const done = events[events.length - 1];
    assert.equal(done.event, 'done');
    if (done.event !== 'done') return;
    assert.equal(done.data.counts.succeeded, 6);
    const ended = events.filter((e) => e.event === 'status' && e.data.terminal);
    assert.deepEqual(new Set(ended.map((e) => (e.data as { run_id: string }).run_id)), new Set(batch.jobs.map((j) => j.run_id)));

    const listed = await client.list({ batch_id: batch.batch_id, limit: 100 });
    assert.equal(listed.data.length, 6);
    assert.ok(listed.data.every((j) => j.batch_id === batch.batch_id && j.status === 'succeeded'));
    assert.equal((await client.getBatch(batch.batch_id)).terminal, true);
    const again = await client.submitBatch(jobs, { idempotencyKey: 'client-batch-1' });
    assert.equal(again.replayed, true);
    assert.equal(again.batch_id, batch.batch_id);
  });

  it('cancels a batch, and surfaces a refused one with the index of each refused job', async () => {
    // The worker is an open one: private jobs stay queued until canceled.
    const queued = await client.submitBatch([{ kind: KIND, input: { prompt: 'x' }, confidentiality: 'private' }, { kind: KIND, input: { prompt: 'y' }, confidentiality: 'private' }]);
    const canceled = await client.cancelBatch(queued.batch_id);
    assert.deepEqual(canceled, { batch_id: queued.batch_id, canceled: 2, cancel_requested: 0, already_terminal: 0 });
    assert.equal((await client.getBatch(queued.batch_id)).counts.canceled, 2);

    const refused = await client.submitBatch([{ kind: KIND, input: { prompt: 'ok' } }, { kind: KIND, input: {} }]).catch((e: unknown) => e);
    assert.ok(refused instanceof SwitchyardBadRequestError);
    assert.deepEqual((refused.details as { errors: Array<{ index: number }> }).errors.map((e) => e.index), [1]);
    const poor = new SwitchyardClient({ baseUrl: gw.url, apiKey: (await gw.account(1)).key });
    await assert.rejects(poor.submitBatch([{ kind: KIND, input: { prompt: 'a' } }]), SwitchyardInsufficientCreditsError);
    await assert.rejects(poor.getBatch(queued.batch_id), SwitchyardNotFoundError);
  });
});
