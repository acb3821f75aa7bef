import assert from 'node:assert/strict';
import { createDemoEngine } from '../sdk/engines/demo/index.js';
import { silentLogger } from '../sdk/worker/logger.js';
import { SwitchyardWorker } from '../sdk/worker/switchyard-worker.js';
import { LLM_KIND } from '../api/services/llm/llm-runner.js';
import { TestGateway, cleanupPrefix, uniquePrefix, until } from './helpers/harness.js';
import { RawWorker } from './helpers/raw-worker.js';

describe('LLM steps on the fleet (LlmRunner)', function () {
  const prefix = uniquePrefix('llm');
  let gw: TestGateway;
  let accountId: string;
  let worker: SwitchyardWorker | undefined;

  before(async () => {
    gw = await new TestGateway(prefix).start();
    accountId = (await gw.account(1000)).id;
  });
  after(async () => {
    await worker?.stop();
    await gw.stop();
    await cleanupPrefix(prefix);
  });

  it('answers 503 unavailable at once while no llm worker is connected, and queues nothing', async () => {
    await assert.rejects(gw.services.llm.run(accountId, { messages: [{ role: 'user', content: 'hi' }] }), (err: any) => err.code === 'unavailable' && err.status === 503);
    const listed = await gw.stores.runs.list(accountId, { limit: 10 });
    assert.equal(listed.runs.length, 0);
  });

  it('runs a step as a paid llm job, streams its deltas and returns text, or tool calls', async () => {
    const token = (await gw.workerToken('open', 'llm'));
    worker = new SwitchyardWorker({ gateway: gw.url, token, kinds: [LLM_KIND], handler: createDemoEngine({ delayMs: 40 }), logger: silentLogger, models: { [LLM_KIND]: [{ id: 'demo-llm' }] } });
    await worker.start();
    const llm = gw.services.llm;
    // `registered` reaches the worker before the gateway has catalogued its models and counted it.
    await until('the worker is counted', async () => (await llm.models()).length > 0);
    assert.deepEqual(await llm.models(), ['demo-llm']);
    const deltas: string[] = [];
    const out = await llm.run(accountId, { messages: [{ role: 'user', content: 'tell me about lighthouses' }] }, { onDelta: (d) => deltas.push(d) });
    assert.ok(out.text.length > 0);
    assert.equal(deltas.join(''), out.text, 'every streamed delta arrives, in order');
    assert.equal(out.tool_calls.length, 0);
    const run = await gw.stores.runs.get(out.run_id);
    assert.equal(run!.status, 'succeeded');
    assert.equal(run!.kind, LLM_KIND);

    const withTool = await llm.run(accountId, {
      messages: [{ role: 'user', content: 'use tool weather for Paris' }],
      tools: [{ type: 'function', function: { name: 'weather', parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } } }],
    });
    assert.equal(withTool.finish_reason, 'tool_calls');
    assert.equal(withTool.tool_calls[0].function.name, 'weather');
    assert.ok(typeof JSON.parse(withTool.tool_calls[0].function.arguments).city === 'string');
  });

  it("keeps only well-formed tool calls from a worker's output (any account can run an llm worker)", async () => {
    await worker?.stop();
    worker = undefined;
    const token = (await gw.workerToken('open', 'raw-llm'));
    const raw = await new RawWorker(gw.url, token).connect({ kinds: [LLM_KIND] });
    try {
      const pending = gw.services.llm.run(accountId, { messages: [{ role: 'user', content: 'hi' }] });
      const lease = await raw.lease();
      const toolCalls = [{}, { function: 7 }, { id: 'c1', function: { name: 'weather', arguments: { city: 'Paris' } } }, { function: { name: 'clock', arguments: '{}' } }];
      await raw.report(lease, { type: 'complete', output: { urls: [], text: '', tool_calls: toolCalls, finish_reason: 'tool_calls' } });
      const out = await pending;
      assert.deepEqual(out.tool_calls, [
        { id: 'c1', type: 'function', function: { name: 'weather', arguments: '{"city":"Paris"}' } },
        { id: 'call_3', type: 'function', function: { name: 'clock', arguments: '{}' } },
      ]);
    } finally {
      raw.close();
    }
  });
});
