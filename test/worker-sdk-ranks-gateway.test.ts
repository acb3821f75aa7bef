import assert from 'node:assert/strict';
import { createDemoEngine } from '../sdk/engines/demo/index.js';
import { imageWhole } from '../sdk/engines/demo/ranked-image.js';
import { generateWhole } from '../sdk/engines/demo/ranked-llm.js';
import { SwitchyardWorker, silentLogger } from '../sdk/worker/index.js';
import { ADMIN_TOKEN, TestGateway, cleanupPrefix, uniquePrefix, until } from './helpers/harness.js';
import { SseClient } from './helpers/sse-client.js';

const LLM = 'inference:llm:text-generate';
const IMAGE = 'inference:image:generate';
const admin = { authorization: `Bearer ${ADMIN_TOKEN}` };

/**
 * The worker SDK's rank leases against the real gateway (docs/ranks.md): SDK workers running the
 * demo engine, one rank each, take a ranked job as one pipeline and give the run the output of
 * the model run whole. test/worker-sdk-ranks.test.ts covers the SDK's side frame by frame.
 */
describe('worker SDK: rank workers run a ranked job through the gateway', function () {
  this.timeout(60_000);
  const prefix = uniquePrefix('worker-sdk-ranks-gateway');
  let gw: TestGateway;
  let key: string;
  let token: string;
  const workers: SwitchyardWorker[] = [];

  async function rankWorker(kind: string, model: string, index: number, count: number): Promise<SwitchyardWorker> {
    const w = new SwitchyardWorker({ gateway: gw.url, token, kinds: [kind], handler: createDemoEngine({ delayMs: 0 }), models: { [kind]: [{ id: model, rank: { index, count } }] }, logger: silentLogger });
    workers.push(w);
    await w.start();
    return w;
  }

  async function run(body: unknown) {
    const res = await gw.submit(key, body);
    assert.equal(res.status, 202, res.text);
    return until(
      'the run finished',
      async () => {
        const r = (await gw.request('GET', `/v1/jobs/${res.body.run_id}`, { key })).body;
        return r.status === 'succeeded' || r.status === 'failed' ? r : null;
      },
      30_000,
    );
  }

  before(async () => {
    gw = await new TestGateway(prefix).start();
    ({ key } = await gw.account(1000));
    token = await gw.workerToken('open');
  });
  after(async () => {
    await Promise.all(workers.map((w) => w.stop({ timeoutMs: 0 })));
    await gw?.stop();
    await cleanupPrefix(prefix);
  });

  it('three SDK workers, one rank of demo-ranked-llm each, write the text of the model run whole, streamed by the last rank', async () => {
    const res = await gw.request('PUT', `/v1/admin/models/${LLM}/demo-ranked-llm`, { headers: admin, body: { ranks: 3 } });
    assert.ok(res.status < 300, res.text);
    for (let index = 0; index < 3; index++) await rankWorker(LLM, 'demo-ranked-llm', index, 3);
    for (const [prompt, maxTokens] of [['hello world', 12], ['in cat', 64]] as const) {
      const job = await run({ kind: LLM, input: { prompt, model: 'demo-ranked-llm', max_tokens: maxTokens } });
      assert.equal(job.status, 'succeeded', JSON.stringify(job.error));
      const whole = generateWhole(prompt, maxTokens);
      assert.equal(job.output.text, whole.text);
      assert.equal(job.output.finish_reason, whole.finish);
      assert.equal(job.output.model, 'demo-ranked-llm');
      assert.deepEqual(job.output.urls, []);
      // The run's event log, read from the start: the last rank's words, which make the text.
      const events = await new SseClient(`${gw.url}/v1/jobs/${job.run_id}/events`, key, { lastEventId: 0 }).open();
      await events.closed;
      assert.equal(events.frames.filter((f) => f.event === 'output').map((f) => f.data.delta).join(''), whole.text);
    }
    assert.deepEqual(workers.map((w) => w.activeLeases), [0, 0, 0]);
  });

  it('two SDK workers of demo-ranked-image make the PNG of the model run whole', async () => {
    const res = await gw.request('PUT', `/v1/admin/models/${IMAGE}/demo-ranked-image`, { headers: admin, body: { ranks: 2 } });
    assert.ok(res.status < 300, res.text);
    for (let index = 0; index < 2; index++) await rankWorker(IMAGE, 'demo-ranked-image', index, 2);
    const prompt = 'a red fox in the snow';
    const job = await run({ kind: IMAGE, input: { prompt, model: 'demo-ranked-image' } });
    assert.equal(job.status, 'succeeded', JSON.stringify(job.error));
    assert.equal(job.output.urls.length, 1);
    // The last rank's complete carries the run's usage (docs/worker-protocol.md, "Usage").
    assert.deepEqual(job.usage, { images: 1 });
    const png = Buffer.from(await (await fetch(job.output.urls[0])).arrayBuffer());
    assert.ok(png.equals(imageWhole(prompt)));
  });
});
