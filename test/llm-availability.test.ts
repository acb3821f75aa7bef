import assert from 'node:assert/strict';
import { LLM_KIND } from '../api/services/llm/llm-runner.js';
import { createDemoEngine } from '../sdk/engines/demo/index.js';
import { silentLogger } from '../sdk/worker/logger.js';
import { SwitchyardWorker } from '../sdk/worker/switchyard-worker.js';
import { TestGateway, cleanupPrefix, uniquePrefix, until } from './helpers/harness.js';

/**
 * Whether a chat completion's model is served now: known without a round trip when a worker
 * connected to the same instance serves it, read from the whole fleet when none here does (the
 * worker may be connected to another instance sharing the Redis).
 */
describe('LlmRunner: is the model served', function () {
  const prefix = uniquePrefix('llmavail');
  const a = new TestGateway(prefix);
  const b = new TestGateway(prefix);
  let worker: SwitchyardWorker;
  let key: string;
  const hello = { model: 'demo-llm', messages: [{ role: 'user', content: 'hello' }] };

  before(async () => {
    await a.start();
    await b.start();
    key = (await a.account()).key;
    worker = new SwitchyardWorker({ gateway: a.url, token: await a.workerToken(), kinds: [LLM_KIND], handler: createDemoEngine({ delayMs: 0 }), logger: silentLogger, models: { [LLM_KIND]: [{ id: 'demo-llm' }] } });
    await worker.start();
    await until('the worker is counted', async () => (await b.services.llm.models()).includes('demo-llm'));
  });
  after(async () => {
    await worker.stop();
    await a.stop();
    await b.stop();
    await cleanupPrefix(prefix);
  });

  /** Counts the fleet reads of an instance while `fn` runs. */
  async function fleetReads(gw: TestGateway, fn: () => Promise<void>): Promise<number> {
    const fleet = gw.dispatcher.fleet;
    const read = fleet.read.bind(fleet);
    let reads = 0;
    fleet.read = () => (reads++, read());
    try {
      await fn();
    } finally {
      fleet.read = read;
    }
    return reads;
  }

  it('answers on the instance the worker is connected to without reading the fleet', async () => {
    const reads = await fleetReads(a, async () => {
      for (const model of ['demo-llm', 'default']) {
        const res = await a.request('POST', '/v1/chat/completions', { key, body: { ...hello, model } });
        assert.equal(res.status, 200, res.text);
      }
    });
    assert.equal(reads, 0);
  });

  it('answers on another instance from the fleet in Redis; an unknown model is still 404 there', async () => {
    const reads = await fleetReads(b, async () => {
      const res = await b.request('POST', '/v1/chat/completions', { key, body: hello });
      assert.equal(res.status, 200, res.text);
      assert.ok(res.body.choices[0].message.content.length > 0);
    });
    assert.equal(reads, 1, 'one read for the request');
    const unknown = await b.request('POST', '/v1/chat/completions', { key, body: { ...hello, model: 'no-such-model' } });
    assert.equal(unknown.status, 404);
    assert.equal(unknown.body.error.code, 'model_not_found');
  });
});
