import assert from 'node:assert/strict';
import { ADMIN_TOKEN, TestGateway, cleanupPrefix, uniquePrefix } from './helpers/harness.js';
import { RawWorker } from './helpers/raw-worker.js';

const LLM = 'inference:llm:text-generate';
const IMAGE = 'inference:image:generate';
const admin = { authorization: `Bearer ${ADMIN_TOKEN}` };

describe('worker socket: workers advertise the models they serve (protocol 3)', function () {
  this.timeout(30_000);
  const prefix = uniquePrefix('worker-models');
  let gw: TestGateway;
  let token: string;
  const sockets: RawWorker[] = [];
  const catalogue = async (kind: string) => (await gw.request('GET', `/v1/admin/models?kind=${encodeURIComponent(kind)}`, { headers: admin })).body.data as Array<Record<string, any>>;
  const connect = async (register: Record<string, unknown>) => {
    const w = new RawWorker(gw.url, token);
    sockets.push(w);
    return w.connect({ protocol: [1, 2, 3], kinds: [LLM, IMAGE], ...register });
  };
  const refused = async (register: Record<string, unknown>) => {
    const err = await connect(register).then(
      () => assert.fail('registered'),
      (e: { frame?: Record<string, any> }) => e,
    );
    return err.frame!;
  };

  before(async () => {
    gw = await new TestGateway(prefix).start();
    token = await gw.workerToken('open', 'model-host');
  });
  afterEach(() => {
    for (const w of sockets.splice(0)) w.terminate();
  });
  after(async () => {
    await gw.stop();
    await cleanupPrefix(prefix);
  });

  it('records the models of a register in the catalogue, with their description and schema', async () => {
    const schema = { type: 'object', properties: { top_k: { type: 'integer', minimum: 1 } } };
    const w = await connect({ models: { [LLM]: [{ id: 'llama3:8b', description: 'Llama 3 8B', input_schema: schema, max_concurrency: 2 }, { id: 'meta-llama/Llama-3.1-8B-Instruct' }] } });
    assert.equal(w.frames.find((f) => f.type === 'registered')!.protocol, 3);
    const models = await catalogue(LLM);
    assert.deepEqual(models.map((m) => m.id), ['llama3:8b', 'meta-llama/Llama-3.1-8B-Instruct']);
    assert.equal(models[0].description, 'Llama 3 8B');
    assert.deepEqual(models[0].input_schema, schema);
    assert.equal(models[0].declared, false);
    assert.ok(Date.parse(models[0].first_seen) > 0);
  });

  it('takes a new list in a models frame without reconnecting, and keeps the old one when the new one is refused', async () => {
    const w = await connect({});
    w.send({ type: 'models', models: { [IMAGE]: [{ id: 'sdxl' }, { id: 'flux-dev', description: 'FLUX.1 dev' }] } });
    assert.equal((await w.next((f) => f.type === 'models_accepted' || f.type === 'error')).type, 'models_accepted');
    assert.deepEqual((await catalogue(IMAGE)).map((m) => m.id), ['flux-dev', 'sdxl']);
    w.send({ type: 'models', models: { [IMAGE]: [{ id: 'sdxl' }, { id: 'sdxl' }] } });
    const answer = await w.next((f) => f.type === 'models_accepted' || f.type === 'error');
    assert.deepEqual([answer.code, answer.of, answer.details.path], ['bad_models', 'models', `/models/${IMAGE}/1/id`]);
    w.send({ type: 'heartbeat', leases: [] });
    w.send({ type: 'models', models: { [IMAGE]: [{ id: 'sd3' }] } });
    assert.equal((await w.next((f) => f.type === 'models_accepted' || f.type === 'error')).type, 'models_accepted', 'the socket stays open after a refusal');
  });

  it('refuses a register whose models are not the worker’s kinds, have a bad id, a schema that does not extend the kind’s, or come without protocol 3', async () => {
    const cases: Array<[Record<string, unknown>, string, RegExp]> = [
      [{ models: { 'inference:rig': [{ id: 'unirig' }] } }, 'bad_models', /did not register for/],
      [{ models: { [LLM]: [{ id: '../etc' }] } }, 'bad_frame', /pattern/],
      [{ models: { [IMAGE]: [{ id: 'narrow', input_schema: { type: 'object', properties: { width: { type: 'string' } } } }] } }, 'bad_models', /input schema of narrow/],
      [{ protocol: [1, 2], models: { [LLM]: [{ id: 'llama3:8b' }] } }, 'bad_frame', /protocol 3/],
    ];
    for (const [register, code, why] of cases) {
      const frame = await refused(register);
      assert.equal(frame.code, code, JSON.stringify(frame));
      assert.match(frame.message, why);
    }
    assert.equal((await catalogue('inference:rig')).length, 0, 'nothing refused is recorded');
  });

  it('refuses a models frame on a connection of protocol 1 or 2', async () => {
    const w = await connect({ protocol: [1, 2] });
    w.send({ type: 'models', models: { [LLM]: [{ id: 'llama3:8b' }] } });
    const answer = await w.next((f) => f.type === 'models_accepted' || f.type === 'error');
    assert.equal(answer.code, 'bad_frame');
    assert.match(answer.message, /protocol 3/);
  });
});
