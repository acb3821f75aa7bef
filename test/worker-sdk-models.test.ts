import assert from 'node:assert/strict';
import { MAX_MODEL_DESCRIPTION, MAX_MODEL_SCHEMA_BYTES, MAX_WORKER_MODELS, type WorkerModels } from '../sdk/protocol/index.js';
import type { Engine } from '../sdk/engines/types.js';
import { SwitchyardWorker } from '../sdk/worker/index.js';
import { silentLogger } from '../sdk/worker/logger.js';
import { TestGateway, cleanupPrefix, uniquePrefix, until } from './helpers/harness.js';

/**
 * The worker SDK's model list (`models` option, `worker.models`, `setModels`): checked against
 * the protocol's limits in the constructor, so a mistake names itself before any connection.
 */

const LLM = 'inference:llm:text-generate';
const IMAGE = 'inference:image:generate';
const handler: Engine = async () => ({ artifacts: [] });
const make = (models: unknown, more: { kinds?: string[] | 'all'; slots?: number } = {}) =>
  new SwitchyardWorker({ gateway: 'http://127.0.0.1:1', token: 'swt_x', kinds: [LLM, IMAGE], handler, logger: silentLogger, ...more, models: models as WorkerModels });

describe('worker SDK: the models option', () => {
  it('keeps a checked, frozen copy of the list, read back through worker.models', () => {
    const given = { [LLM]: [{ id: 'meta-llama/Llama-3.1-8B-Instruct', description: 'chat', max_concurrency: 2 }, { id: 'qwen2.5:7b' }], [IMAGE]: [{ id: 'flux', input_schema: { type: 'object', properties: { steps: { type: 'integer' } } } }] };
    const w = make(given, { slots: 2 });
    assert.deepEqual(w.models, given);
    given[LLM].push({ id: 'late-addition' });
    assert.equal(w.models![LLM].length, 2, 'the caller changing its object afterwards changes nothing');
    assert.ok(Object.isFrozen(w.models) && Object.isFrozen(w.models![IMAGE][0].input_schema!.properties));
    assert.equal(make(undefined).models, undefined, 'no list: the kinds’ default models only');
  });

  it('refuses lists the protocol would refuse, naming the problem', () => {
    const cases: Array<[unknown, RegExp, { kinds?: string[]; slots?: number }?]> = [
      [[{ id: 'a' }], /must be an object/],
      [{ [LLM]: { id: 'a' } }, /must be a list/],
      [{ 'inference:rig': [{ id: 'a' }] }, /inference:rig, which is not among the worker's kinds/],
      [{ [LLM]: [{ id: '/models/7B.gguf' }] }, /"\/models\/7B.gguf" .* is not a model id/],
      [{ [LLM]: [{ id: 'x'.repeat(201) }] }, /is not a model id/],
      [{ [LLM]: [{ id: 'a' }, { id: 'a' }] }, /listed twice/],
      [{ [LLM]: ['a'] }, /must be \{id/],
      [{ [LLM]: [{ id: 'a', name: 'A' }] }, /fields the protocol does not know: name/],
      [{ [LLM]: [{ id: 'a', description: 'd'.repeat(MAX_MODEL_DESCRIPTION + 1) }] }, /description of a/],
      [{ [LLM]: [{ id: 'a', input_schema: [] }] }, /input_schema of a must be a JSON Schema object/],
      [{ [LLM]: [{ id: 'a', input_schema: { description: 'd'.repeat(MAX_MODEL_SCHEMA_BYTES) } }] }, /over 65536 bytes/],
      [{ [LLM]: [{ id: 'a', max_concurrency: 0 }] }, /max_concurrency of a/],
      [{ [LLM]: [{ id: 'a', max_concurrency: 3 }] }, /from 1 to the worker's slots \(2\)/, { slots: 2 }],
    ];
    for (const [models, message, more] of cases) assert.throws(() => make(models, more), message, JSON.stringify(models).slice(0, 80));
  });

  it(`counts the limit of ${MAX_WORKER_MODELS} models over all kinds`, () => {
    const ids = (n: number, p: string) => Array.from({ length: n }, (_, i) => ({ id: `${p}-${i}` }));
    const half = MAX_WORKER_MODELS / 2;
    assert.equal(make({ [LLM]: ids(half, 'l'), [IMAGE]: ids(half, 'i') }).models![IMAGE].length, half);
    assert.throws(() => make({ [LLM]: ids(half, 'l'), [IMAGE]: ids(half + 1, 'i') }), new RegExp(`at most ${MAX_WORKER_MODELS} models`));
  });

  it("admits any kind for a worker of kinds 'all'", () => {
    const w = make({ 'inference:rig': [{ id: 'rigger' }] }, { kinds: 'all' as never });
    assert.deepEqual(w.models, { 'inference:rig': [{ id: 'rigger' }] });
  });

  it('setModels replaces the list after the same checks, and keeps the old one when refused', () => {
    const w = make({ [LLM]: [{ id: 'a' }] });
    w.setModels({ [LLM]: [{ id: 'a' }, { id: 'b' }] });
    assert.deepEqual(w.models, { [LLM]: [{ id: 'a' }, { id: 'b' }] });
    assert.throws(() => w.setModels({ [LLM]: [{ id: '-bad' }] }), /not a model id/);
    assert.throws(() => w.setModels({ 'inference:rig': [] }), /not among the worker's kinds/);
    assert.deepEqual(w.models, { [LLM]: [{ id: 'a' }, { id: 'b' }] });
    w.setModels({});
    assert.deepEqual(w.models, {});
  });
});

describe('worker SDK: models on the wire (protocol 3)', function () {
  this.timeout(30_000);
  const prefix = uniquePrefix('sdk-models');
  let gw: TestGateway;
  let key: string;
  let worker: SwitchyardWorker | undefined;
  const ran: string[] = [];
  const recording: Engine = async (_kind, input) => {
    ran.push(String(input.model ?? ''));
    return { artifacts: [] };
  };

  before(async () => {
    gw = await new TestGateway(prefix).start();
    ({ key } = await gw.account(1000));
  });
  after(async () => {
    await worker?.stop({ timeoutMs: 0 });
    await gw.stop();
    await cleanupPrefix(prefix);
  });

  it('registers its models, and setModels reroutes it without reconnecting', async () => {
    worker = new SwitchyardWorker({ gateway: gw.url, token: await gw.workerToken(), kinds: [IMAGE], handler: recording, logger: silentLogger, models: { [IMAGE]: [{ id: 'sdxl' }] } });
    await worker.start();
    const run = async (model: string) => {
      const res = await gw.submit(key, { kind: IMAGE, input: { prompt: 'p', model } });
      assert.equal(res.status, 202, res.text);
      return res.body.run_id as string;
    };
    const status = async (id: string) => (await gw.request('GET', `/v1/jobs/${id}`, { key })).body;
    const first = await run('sdxl');
    await until('the sdxl job succeeded', async () => (await status(first)).status === 'succeeded');
    assert.equal((await gw.submit(key, { kind: IMAGE, input: { prompt: 'p', model: 'flux-dev' } })).body.error.code, 'unknown_model', 'flux-dev is not advertised yet');
    const workerId = worker.workerId;
    worker.setModels({ [IMAGE]: [{ id: 'sdxl' }, { id: 'flux-dev' }] });
    await until('the catalogue knows flux-dev', async () => (await gw.stores.models.get(IMAGE, 'flux-dev')) !== null);
    const flux = await run('flux-dev');
    await until('the flux-dev job succeeded', async () => (await status(flux)).status === 'succeeded');
    assert.equal(worker.workerId, workerId, 'the same connection');
    worker.setModels({ [IMAGE]: [{ id: 'flux-dev' }] });
    await until('the gateway dropped sdxl from the worker', async () => gw.dispatcher.localWorkers()[0]?.models[IMAGE]?.length === 1);
    const sdxl = await run('sdxl');
    assert.equal((await status(sdxl)).waiting_reason, 'no_worker_for_model');
    assert.deepEqual(ran, ['sdxl', 'flux-dev']);
  });
});
