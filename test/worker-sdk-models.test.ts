import assert from 'node:assert/strict';
import { MAX_MODEL_DESCRIPTION, MAX_MODEL_SCHEMA_BYTES, MAX_WORKER_MODELS, type WorkerModels } from '../sdk/protocol/index.js';
import type { Engine } from '../sdk/engines/types.js';
import { SwitchyardWorker } from '../sdk/worker/index.js';
import { silentLogger } from '../sdk/worker/logger.js';

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
