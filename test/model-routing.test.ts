import assert from 'node:assert/strict';
import { ADMIN_TOKEN, TestGateway, cleanupPrefix, errorCode, uniquePrefix, until } from './helpers/harness.js';
import { RawWorker, type Frame } from './helpers/raw-worker.js';

const IMAGE = 'inference:image:generate';
const admin = { authorization: `Bearer ${ADMIN_TOKEN}` };

describe('model routing: jobs naming a model reach only workers serving it', function () {
  this.timeout(40_000);
  const prefix = uniquePrefix('model-routing');
  let gw: TestGateway;
  let key: string;
  let openToken: string;
  let trustedToken: string;
  const sockets: RawWorker[] = [];

  /** A protocol-3 worker of the image kind serving `models` (ids, or full entries). */
  const worker = async (models: Array<string | Record<string, unknown>>, opts: { slots?: number; tier?: 'open' | 'trusted'; kinds?: string[] } = {}) => {
    const w = new RawWorker(gw.url, opts.tier === 'trusted' ? trustedToken : openToken);
    sockets.push(w);
    const list = models.map((m) => (typeof m === 'string' ? { id: m } : m));
    return w.connect({ protocol: [1, 2, 3], kinds: opts.kinds ?? [IMAGE], tier: opts.tier ?? 'open', slots: opts.slots ?? 1, models: list.length ? { [IMAGE]: list } : {} });
  };
  const submit = async (model: string | null, extra: Record<string, unknown> = {}) => {
    const res = await gw.submit(key, { kind: IMAGE, input: { prompt: 'a lighthouse', ...(model ? { model } : {}) }, ...extra });
    assert.equal(res.status, 202, res.text);
    return res.body.run_id as string;
  };
  const declare = (id: string, body: Record<string, unknown> = {}) => gw.request('PUT', `/v1/admin/models/${encodeURIComponent(IMAGE)}/${encodeURIComponent(id)}`, { headers: admin, body });
  const job = async (runId: string) => (await gw.request('GET', `/v1/jobs/${runId}`, { key })).body;
  const modelOf = (lease: Frame) => lease.input.model ?? null;

  before(async () => {
    gw = await new TestGateway(prefix).start();
    ({ key } = await gw.account(100_000));
    openToken = await gw.workerToken('open', 'routing-open');
    trustedToken = await gw.workerToken('trusted', 'routing-trusted');
  });
  afterEach(async () => {
    for (const w of sockets.splice(0)) w.terminate();
    // Nothing one case leaves queued may reach the next case's workers.
    await until('no worker is attached', async () => gw.dispatcher.localWorkers().length === 0);
    for (const q of await gw.queues.known()) await q.obliterate({ force: true });
  });
  after(async () => {
    await gw.stop();
    await cleanupPrefix(prefix);
  });

  it('sends each job to the worker serving its model, and a job naming none to either', async () => {
    const sdxl = await worker(['sdxl']);
    const flux = await worker(['flux-dev']);
    await submit('flux-dev');
    await submit('sdxl');
    const [a, b] = await Promise.all([sdxl.lease(), flux.lease()]);
    assert.equal(modelOf(a), 'sdxl');
    assert.equal(modelOf(b), 'flux-dev');
    await Promise.all([sdxl.complete(a), flux.complete(b)]);
    await submit(null);
    const either = await Promise.race([sdxl.lease(), flux.lease()]);
    assert.equal(modelOf(either), null, 'the kind default queue is served by every worker of the kind');
  });

  it('refuses a model the catalogue does not know, naming the known ones and the nearest', async () => {
    await worker(['sdxl']);
    const res = await gw.submit(key, { kind: IMAGE, input: { prompt: 'x', model: 'sdxI' } });
    assert.equal(res.status, 400);
    assert.equal(errorCode(res), 'unknown_model');
    assert.equal(res.body.error.details.did_you_mean, 'sdxl');
    assert.ok(res.body.error.details.known.includes('sdxl'));
    assert.equal(res.body.error.details.path, '/input/model');
  });

  it('accepts a known model nobody serves, says why it waits, and runs it when a worker brings the model', async () => {
    assert.equal((await declare('sd3-medium', { description: 'declared ahead of its workers' })).status, 201);
    await worker(['sdxl']);
    const runId = await submit('sd3-medium');
    const waiting = await job(runId);
    assert.equal(waiting.status, 'queued');
    assert.equal(waiting.queue_position, 1);
    assert.equal(waiting.waiting_reason, 'no_worker_for_model');
    // A job for another model is not held up behind it.
    const other = await submit('sdxl');
    await until('the sdxl job runs', async () => (await job(other)).status === 'running');
    const late = await worker(['sd3-medium']);
    const lease = await late.lease();
    assert.equal(lease.run_id, runId);
    assert.equal((await job(runId)).waiting_reason, null);
  });

  it('follows a worker that changes its model list without reconnecting', async () => {
    const w = await worker(['sdxl']);
    await declare('flux-schnell');
    const runId = await submit('flux-schnell');
    assert.equal((await job(runId)).waiting_reason, 'no_worker_for_model');
    w.send({ type: 'models', models: { [IMAGE]: [{ id: 'sdxl' }, { id: 'flux-schnell' }] } });
    const lease = await w.lease();
    assert.equal(lease.run_id, runId);
    await w.complete(lease);
    // Unloading a model: its jobs wait again instead of reaching the worker.
    w.send({ type: 'models', models: { [IMAGE]: [{ id: 'sdxl' }] } });
    await w.next((f) => f.type === 'models_accepted');
    const after = await submit('flux-schnell');
    await until('the job says why it waits', async () => (await job(after)).waiting_reason === 'no_worker_for_model');
    await submit('sdxl');
    assert.equal(modelOf(await w.lease()), 'sdxl');
    assert.equal(w.leases().filter((l) => l.run_id === after).length, 0);
  });

  it('serves models in turn: a burst for one model does not hold back another model of the same worker', async () => {
    const w = await worker(['sdxl', 'flux-dev']);
    // One slot, so the order of the leases is the order the scheduler chose.
    for (let i = 0; i < 12; i++) await submit('sdxl');
    const flux = await submit('flux-dev');
    const order: string[] = [];
    for (let i = 0; i < 4; i++) {
      const lease = await w.lease();
      order.push(lease.run_id === flux ? 'flux' : 'sdxl');
      await w.complete(lease);
    }
    assert.ok(order.slice(0, 2).includes('flux'), `the flux job came among the first two leases: ${order.join(',')}`);
  });

  it('keeps a job for an unserved model from blocking the queue of the models that are served', async () => {
    await declare('ghost');
    for (let i = 0; i < 3; i++) await submit('ghost');
    const w = await worker(['sdxl']);
    const served = await submit('sdxl');
    assert.equal((await w.lease()).run_id, served);
  });

  it("holds a model's max_concurrency on a worker with more slots, while other work still fills them", async () => {
    const w = await worker([{ id: 'sdxl', max_concurrency: 1 }], { slots: 3 });
    const first = await submit('sdxl');
    const second = await submit('sdxl');
    const plain = await submit(null);
    const leases = [await w.lease(), await w.lease()];
    assert.deepEqual(leases.map((l) => l.run_id).sort(), [first, plain].sort(), 'one sdxl job and the plain one');
    assert.equal((await job(second)).status, 'queued');
    const capacity = (await gw.request('GET', '/v1/network/capacity')).body;
    const sdxl = capacity.by_kind.find((k: any) => k.kind === IMAGE).models.find((m: any) => m.id === 'sdxl');
    assert.deepEqual([sdxl.workers, sdxl.slots_free, sdxl.queued], [1, 0, 1]);
    await w.complete(leases.find((l) => l.run_id === first)!);
    assert.equal((await w.lease()).run_id, second);
  });

  it('keeps tiers per model: an open worker never gets a trusted job, a trusted worker takes open jobs of its model', async () => {
    const open = await worker(['sdxl']);
    const trustedJob = await submit('sdxl', { confidentiality: 'trusted' });
    assert.equal((await job(trustedJob)).waiting_reason, 'no_worker_for_kind', 'no worker of that tier or a stronger one');
    const trusted = await worker(['sdxl'], { tier: 'trusted' });
    assert.equal((await trusted.lease()).run_id, trustedJob);
    const openJob = await submit('sdxl');
    const lease = await Promise.race([open.lease(), trusted.lease()]);
    assert.equal(lease.run_id, openJob);
    assert.equal(open.leases().filter((l) => l.run_id === trustedJob).length, 0);
  });

  it('returns a lost lease to its model queue, where only a worker of that model takes it', async () => {
    const plain = await worker([]);
    const first = await worker(['sdxl']);
    const runId = await submit('sdxl');
    assert.equal((await first.lease()).run_id, runId);
    first.terminate();
    await until('the run is queued again', async () => (await job(runId)).status === 'queued');
    assert.equal((await job(runId)).waiting_reason, 'no_worker_for_model');
    const second = await worker(['sdxl']);
    const lease = await second.lease();
    assert.equal(lease.run_id, runId);
    assert.equal(lease.attempt, 2);
    assert.equal(plain.leases().length, 0, 'the worker without the model never saw it');
  });

  it('cancels a queued model job out of its queue, and a running one through its worker', async () => {
    await declare('idle-model');
    const queued = await submit('idle-model');
    assert.equal((await gw.request('POST', `/v1/jobs/${queued}/cancel`, { key })).status, 200);
    assert.equal(await gw.queuedJob(queued, IMAGE, 'open', 'idle-model'), undefined);
    const w = await worker(['sdxl']);
    const running = await submit('sdxl');
    const lease = await w.lease();
    assert.equal((await gw.request('POST', `/v1/jobs/${running}/cancel`, { key })).status, 200);
    const cancel = await w.next((f) => f.type === 'cancel');
    assert.equal(cancel.lease_id, lease.lease_id);
  });

  it('lists every model queue for Bull Board and the capacity view, whichever instance made it', async () => {
    await declare('listed-model');
    await submit('listed-model');
    const other = await new TestGateway(prefix).start();
    try {
      const names = (await other.queues.known()).map((q) => q.name);
      assert.ok(names.includes('inference.image.generate.open~listed-model'), names.join(' '));
      const capacity = (await other.request('GET', '/v1/network/capacity')).body;
      assert.equal(capacity.by_kind.find((k: any) => k.kind === IMAGE).models.find((m: any) => m.id === 'listed-model').queued, 1);
    } finally {
      await other.stop();
    }
  });
});
