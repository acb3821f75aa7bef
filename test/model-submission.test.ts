import assert from 'node:assert/strict';
import { ADMIN_TOKEN, TestGateway, cleanupPrefix, errorCode, uniquePrefix } from './helpers/harness.js';
import { RawWorker } from './helpers/raw-worker.js';

const IMAGE = 'inference:image:generate';
const admin = { authorization: `Bearer ${ADMIN_TOKEN}` };
const SDXL_SCHEMA = {
  type: 'object',
  properties: {
    width: { type: 'integer', enum: [512, 768, 1024] },
    scheduler: { type: 'string', enum: ['euler', 'dpm++'] },
    refiner: { type: 'boolean' },
  },
};

describe('job submission against the model catalogue', function () {
  this.timeout(30_000);
  const prefix = uniquePrefix('model-submission');
  let gw: TestGateway;
  let key: string;
  const sockets: RawWorker[] = [];
  const submit = (input: Record<string, unknown>) => gw.submit(key, { kind: IMAGE, input: { prompt: 'a lighthouse', ...input } });
  const declare = (id: string, body: Record<string, unknown> = {}) => gw.request('PUT', `/v1/admin/models/${encodeURIComponent(IMAGE)}/${encodeURIComponent(id)}`, { headers: admin, body });

  before(async () => {
    gw = await new TestGateway(prefix).start();
    ({ key } = await gw.account(10_000));
    assert.equal((await declare('sdxl', { description: 'Stable Diffusion XL', input_schema: SDXL_SCHEMA })).status, 201);
    assert.equal((await declare('flux-dev')).status, 201);
  });
  afterEach(() => {
    for (const w of sockets.splice(0)) w.terminate();
  });
  after(async () => {
    await gw.stop();
    await cleanupPrefix(prefix);
  });

  it("checks the input strictly against the model's schema: a typo is 400 with a did-you-mean hint", async () => {
    const typo = await submit({ model: 'sdxl', widht: 1024 });
    assert.equal(typo.status, 400);
    assert.equal(errorCode(typo), 'invalid_request');
    assert.match(typo.body.error.message, /"widht" is not a field of model sdxl of inference:image:generate \(did you mean "width"\?\)/);
    assert.deepEqual(typo.body.error.details.errors.map((e: { path: string }) => e.path), ['/input/widht']);
    const narrowed = await submit({ model: 'sdxl', width: 640, scheduler: 'ddim' });
    assert.equal(narrowed.status, 400);
    assert.deepEqual(narrowed.body.error.details.errors.map((e: { path: string }) => e.path).sort(), ['/input/scheduler', '/input/width']);
    const good = await submit({ model: 'sdxl', width: 1024, scheduler: 'euler', refiner: true, seed: 7 });
    assert.equal(good.status, 202, good.text);
    assert.deepEqual(good.body.warnings, []);
  });

  it('accepts fields no schema names when the model publishes none, listing them as warnings in the 202 (the same on replay)', async () => {
    const body = { kind: IMAGE, input: { prompt: 'a lighthouse', model: 'flux-dev', guidance: 3.5, widht: 512 } };
    const first = await gw.submit(key, body, { 'Idempotency-Key': 'warn-1' });
    assert.equal(first.status, 202, first.text);
    assert.deepEqual(first.body.warnings, [
      { path: '/input/guidance', message: '"guidance" is not a field of inference:image:generate; it is passed to the worker as it is' },
      { path: '/input/widht', message: '"widht" is not a field of inference:image:generate; it is passed to the worker as it is (did you mean "width"?)' },
    ]);
    const replay = await gw.submit(key, body, { 'Idempotency-Key': 'warn-1' });
    assert.equal(replay.text, first.text);
    const noModel = await submit({ steps: 30 });
    assert.deepEqual(noModel.body.warnings.map((w: { path: string }) => w.path), ['/input/steps'], 'a job naming no model is checked against its kind');
  });

  it('checks the model before staging any file: a refused model leaves no file behind', async () => {
    const png = `data:image/png;base64,${Buffer.from('89504e470d0a1a0a0000000d4948445200000001000000010806000000', 'hex').toString('base64')}`;
    const res = await gw.submit(key, { kind: 'inference:3d:image-to-mesh', input: { image: png, model: 'nope' } });
    assert.equal(errorCode(res), 'unknown_model');
    assert.deepEqual((await gw.request('GET', '/v1/files', { key })).body.data, []);
  });

  it('shows each kind\'s models in /v1/capabilities with live workers by tier and their schemas', async () => {
    const token = await gw.workerToken('trusted', 'caps');
    const w = new RawWorker(gw.url, token);
    sockets.push(w);
    await w.connect({ protocol: [1, 2, 3], kinds: [IMAGE], tier: 'trusted', slots: 2, models: { [IMAGE]: [{ id: 'sdxl' }] } });
    // The sdxl job and the job naming no model that earlier cases queued reach it; flux-dev's does not.
    const leased = [await w.lease(), await w.lease()].map((l) => l.input.model ?? null);
    assert.deepEqual(leased.sort(), [null, 'sdxl']);
    const caps = (await gw.request('GET', '/v1/capabilities', { key })).body;
    const models = caps.kinds.find((k: { kind: string }) => k.kind === IMAGE).models;
    assert.deepEqual(
      models.map((m: any) => [m.id, m.workers, m.workers_by_tier.trusted]),
      [['flux-dev', 0, 0], ['sdxl', 1, 1]],
    );
    assert.deepEqual(models.find((m: any) => m.id === 'sdxl').input_schema, SDXL_SCHEMA, "the operator's declaration stands over the worker's silence");
    const capacity = (await gw.request('GET', '/v1/network/capacity')).body;
    assert.deepEqual(capacity.by_kind.find((k: any) => k.kind === IMAGE).models.find((m: any) => m.id === 'sdxl'), { id: 'sdxl', workers: 1, workers_unavailable: 0, slots_free: 0, queued: 0 });
  });

  it('keeps the catalogue across a gateway restart: declared and advertised models are still known', async () => {
    const token = await gw.workerToken('open', 'restart');
    const w = new RawWorker(gw.url, token);
    await w.connect({ protocol: [1, 2, 3], kinds: [IMAGE], models: { [IMAGE]: [{ id: 'sd-turbo' }] } });
    w.terminate();
    await gw.stop();
    gw = await new TestGateway(prefix).start();
    const ids = (await gw.request('GET', `/v1/admin/models?kind=${encodeURIComponent(IMAGE)}`, { headers: admin })).body.data.map((m: { id: string }) => m.id);
    assert.deepEqual(ids, ['flux-dev', 'sd-turbo', 'sdxl']);
    const res = await submit({ model: 'sd-turbo' });
    assert.equal(res.status, 202, res.text);
    assert.equal((await gw.request('GET', `/v1/jobs/${res.body.run_id}`, { key })).body.waiting_reason, 'no_worker_for_kind');
  });
});
