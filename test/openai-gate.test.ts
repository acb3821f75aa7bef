import assert from 'node:assert/strict';
import { LLM_KIND } from '../api/services/llm/llm-runner.js';
import { createDemoEngine } from '../sdk/engines/demo/index.js';
import { silentLogger } from '../sdk/worker/logger.js';
import { SwitchyardWorker } from '../sdk/worker/switchyard-worker.js';
import { gateCalls, scriptCalls } from './helpers/script-calls.js';
import { TestGateway, cleanupPrefix, uniquePrefix, until } from './helpers/harness.js';

/**
 * `POST /v1/chat/completions` leaves its key's request gate to the llm job's create, which runs
 * it in its own script (as a plain POST /v1/jobs does): one Redis script per completion fewer.
 * Whatever the path, a request counts once against the limit, and a revoked or limited key gets
 * that answer (in OpenAI's error shape), not the request's other failure, with nothing created.
 */
describe('the chat completion gate', function () {
  const prefix = uniquePrefix('chatgate');
  const gw = new TestGateway(prefix, { RATE_LIMIT_PER_SEC: String(1 / 60), RATE_LIMIT_BURST: '6' });
  let worker: SwitchyardWorker;
  const hello = { model: 'default', messages: [{ role: 'user', content: 'hello' }] };

  before(async () => {
    await gw.start();
    worker = new SwitchyardWorker({ gateway: gw.url, token: await gw.workerToken(), kinds: [LLM_KIND], handler: createDemoEngine({ delayMs: 0 }), logger: silentLogger });
    await worker.start();
    await until('the llm worker is counted', async () => (await gw.services.llm.models()).length > 0);
  });
  after(async () => {
    await worker.stop();
    await gw.stop();
    await cleanupPrefix(prefix);
  });

  it("runs in the same Redis script as the create of the llm job, on a cluster too (the key's limiter is in its account's slot)", async () => {
    const { key } = await gw.account();
    const gated = gateCalls(await scriptCalls(gw, async () => {
      const res = await gw.request('POST', '/v1/chat/completions', { key, body: hello });
      assert.equal(res.status, 200);
    }));
    assert.equal(gated.length, 1, 'the gate ran once');
    // Fused: one script, one round trip (models/redis/keys.ts: on a cluster the key's limiter is in its account's group).
    assert.ok(gated[0].some((x) => /:run:run_/.test(x)), 'in the call that creates the run');
  });

  it('takes one request off the limit whatever the answer, streamed or not, and answers a limited key 429 before its other failures', async () => {
    const { id, key } = await gw.account(100);
    const remaining = (res: { headers: Headers }) => res.headers.get('ratelimit-remaining');
    const plain = await gw.request('POST', '/v1/chat/completions', { key, body: hello });
    assert.equal(plain.status, 200);
    assert.equal(remaining(plain), '5');
    const streamed = await fetch(`${gw.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ ...hello, stream: true }),
    });
    assert.equal(streamed.status, 200);
    assert.equal(remaining(streamed), '4', 'the stream carries the gate verdict in its headers');
    assert.match(await streamed.text(), /data: \[DONE\]/);
    const invalid = await gw.request('POST', '/v1/chat/completions', { key, body: { model: 'default' } });
    assert.equal(invalid.status, 400);
    assert.equal(remaining(invalid), '3');
    const unknown = await gw.request('POST', '/v1/chat/completions', { key, body: { ...hello, model: 'no-such-model' } });
    assert.equal(unknown.status, 404);
    assert.equal(remaining(unknown), '2');
    assert.equal((await gw.request('POST', '/v1/chat/completions', { key, body: hello })).status, 200);
    assert.equal((await gw.request('POST', '/v1/chat/completions', { key, body: hello })).status, 200);
    for (const body of [hello, { model: 'default' }, { ...hello, model: 'no-such-model' }]) {
      const limited = await gw.request('POST', '/v1/chat/completions', { key, body });
      assert.equal(limited.status, 429);
      assert.equal(limited.body.error.code, 'rate_limited', 'in OpenAI\'s error shape');
    }
    const account = await gw.stores.accounts.get(id);
    assert.equal(account?.in_flight, 0);
    const runs = await gw.stores.runs.list(id, { limit: 10 });
    assert.equal(runs.runs.length, 4, 'the four completions answered 200, no more');
  });

  it("refuses a revoked key's completions, whatever their body, creating nothing", async () => {
    const { id, key } = await gw.account(100);
    const second = (await gw.request('POST', '/v1/account/keys', { key })).body;
    assert.equal((await gw.request('POST', '/v1/chat/completions', { key: second.key, body: hello })).status, 200, 'the key is cached now');
    assert.equal((await gw.request('DELETE', `/v1/account/keys/${second.id}`, { key })).status, 200);
    for (const body of [hello, { ...hello, stream: true }, { model: 'default' }]) {
      const res = await gw.request('POST', '/v1/chat/completions', { key: second.key, body });
      assert.equal(res.status, 401);
    }
    assert.equal((await gw.stores.runs.list(id, { limit: 10 })).runs.length, 1);
  });
});
