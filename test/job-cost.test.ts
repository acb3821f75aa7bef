import assert from 'node:assert/strict';
import { createDemoEngine } from '../sdk/engines/demo/index.js';
import { LLM_KIND, createOpenAiEngine } from '../sdk/engines/openai/index.js';
import { SwitchyardWorker } from '../sdk/worker/index.js';
import { silentLogger } from '../sdk/worker/logger.js';
import { TestGateway, cleanupPrefix, errorCode, uniquePrefix, until } from './helpers/harness.js';
import { OpenAiUpstream } from './helpers/openai-upstream.js';
import { dataUri, sampleGlb } from './helpers/sample-files.js';

/**
 * Usage-based cost (docs/jobs.md, "Cost"): submission reserves the most a job can cost, the
 * terminal transition charges what its worker reported it used and returns the rest, and a
 * monthly budget refuses submissions past it. Real workers: the OpenAI engine against a
 * server speaking OpenAI's wire format (with `usage`), and the demo engine for video.
 */
const VIDEO = 'inference:video:generate';
const IMAGE = 'inference:image:generate';
const SFX = 'inference:audio:sfx-generate';
const RIG = 'inference:rig';
const PRICES = {
  [LLM_KIND]: { base: 1, per_1k_input_tokens: 100, per_1k_output_tokens: 1000, max: 500 },
  [VIDEO]: { base: 2, per_second: 3, max_seconds: 120 },
  [SFX]: { base: 1, per_second: 2, max_seconds: 30 },
};
const ADMIN = { authorization: 'Bearer test-admin-token-0123456789' };

describe('job cost', () => {
  const prefix = uniquePrefix('job-cost');
  let gw: TestGateway;
  let upstream: OpenAiUpstream;
  const workers: SwitchyardWorker[] = [];
  before(async () => {
    upstream = await new OpenAiUpstream(['upstream-model']).start();
    gw = await new TestGateway(prefix, { PRICES: JSON.stringify(PRICES) }).start();
    const llm = createOpenAiEngine({ backendUrl: upstream.url });
    workers.push(new SwitchyardWorker({ gateway: gw.url, token: await gw.workerToken(), kinds: [LLM_KIND], handler: llm.handler, models: { [LLM_KIND]: await llm.listModels() }, logger: silentLogger }));
    workers.push(new SwitchyardWorker({ gateway: gw.url, token: await gw.workerToken(), kinds: [VIDEO], handler: createDemoEngine({ delayMs: 0 }), logger: silentLogger }));
    // A worker claiming far more than the job could use, and one that fails.
    const claims = async () => ({ artifacts: [], extra: { duration_s: 999 }, usage: { seconds: 999 } });
    const fails = async () => Promise.reject(Object.assign(new Error('out of memory'), { code: 'oom', retryable: false }));
    workers.push(new SwitchyardWorker({ gateway: gw.url, token: await gw.workerToken(), kinds: [SFX, RIG], handler: (kind) => (kind === SFX ? claims() : fails()), logger: silentLogger }));
    for (const w of workers) await w.start();
  });
  after(async () => {
    for (const w of workers) await w.stop({ timeoutMs: 0 });
    await gw?.stop();
    await upstream?.stop();
    await cleanupPrefix(prefix);
  });

  const balance = async (key: string) => (await gw.request('GET', '/v1/account', { key })).body as { credits: number; reserved: number; budget: unknown };
  const job = async (key: string, runId: string) => (await gw.request('GET', `/v1/jobs/${runId}`, { key })).body;
  const finished = (key: string, runId: string) => until(`${runId} ends`, async () => ((await job(key, runId)).terminal ? job(key, runId) : null));

  it('reserves an LLM job for its prompt and max_tokens, and charges the tokens the server counted', async () => {
    const { key } = await gw.account(1000);
    const prompt = 'hello there'; // 11 bytes: at most 11 input tokens
    upstream.reply = () => ({ content: ['Hi', ' you'], usage: { prompt_tokens: 7, completion_tokens: 3 } });
    const res = await gw.submit(key, { kind: LLM_KIND, input: { prompt, max_tokens: 50 } });
    assert.equal(res.status, 202, res.text);
    // 1 + ceil((11 × 100 + 50 × 1000) / 1000) = 53
    const reserved = 53;
    const queued = await job(key, res.body.run_id);
    assert.deepEqual(queued.cost, { reserved, charged: null });
    const done = await finished(key, res.body.run_id);
    assert.equal(done.status, 'succeeded', JSON.stringify(done.error));
    assert.deepEqual(done.usage, { input_tokens: 7, output_tokens: 3 });
    // 1 + ceil((7 × 100 + 3 × 1000) / 1000) = 5
    assert.deepEqual(done.cost, { reserved, charged: 5 });
    const b = await balance(key);
    assert.deepEqual([b.credits, b.reserved], [995, 0], 'the rest of the reservation came back, exactly');
    // The status events, whose job view the transition builds in Lua, say the same.
    const events = await gw.gateway.core.eventLog.after(res.body.run_id, 0);
    const last = JSON.parse(events.find((e) => e.event === 'done')!.data);
    assert.deepEqual([last.cost, last.usage], [done.cost, done.usage]);
    // The server was asked for its count on the stream.
    assert.equal(upstream.completions.at(-1)!.body.stream_options?.include_usage, true);
  });

  it('charges a video by the seconds the worker made, and reserves the kind maximum for a job without a duration', async () => {
    const { key } = await gw.account(1000);
    const bounded = await gw.submit(key, { kind: VIDEO, input: { prompt: 'waves', duration_s: 4, fps: 2 } });
    assert.equal(bounded.status, 202, bounded.text);
    assert.equal((await job(key, bounded.body.run_id)).cost.reserved, 2 + 4 * 3);
    const open = await gw.submit(key, { kind: VIDEO, input: { prompt: 'waves', fps: 2 } });
    assert.equal((await job(key, open.body.run_id)).cost.reserved, 2 + 120 * 3, 'no duration: max_seconds');
    const a = await finished(key, bounded.body.run_id);
    const b = await finished(key, open.body.run_id);
    assert.deepEqual(a.usage, { seconds: 4 });
    assert.deepEqual(a.cost, { reserved: 14, charged: 14 });
    // The demo makes one second when the input names no duration.
    assert.deepEqual(b.usage, { seconds: 1 });
    assert.deepEqual(b.cost, { reserved: 362, charged: 5 });
    const acct = await balance(key);
    assert.deepEqual([acct.credits, acct.reserved], [1000 - 14 - 5, 0]);
  });

  it('never charges more than was reserved, and charges a failed job nothing', async () => {
    const { key } = await gw.account(100);
    const sfx = await gw.submit(key, { kind: SFX, input: { prompt: 'boom', duration_s: 5 } });
    const rig = await gw.submit(key, { kind: RIG, input: { mesh: dataUri('model/gltf-binary', await sampleGlb()) } });
    assert.equal(sfx.status, 202, sfx.text);
    assert.equal(rig.status, 202, rig.text);
    const a = await finished(key, sfx.body.run_id);
    assert.deepEqual(a.usage, { seconds: 999 });
    assert.deepEqual(a.cost, { reserved: 11, charged: 11 }, '1 + 5 × 2 reserved; 1 + 999 × 2 reported');
    const b = await finished(key, rig.body.run_id);
    assert.equal(b.status, 'failed');
    assert.deepEqual(b.cost, { reserved: 10, charged: 0 });
    const acct = await balance(key);
    assert.deepEqual([acct.credits, acct.reserved], [100 - 11, 0]);
  });

  it('reserves each run of a batch as a single submission would', async () => {
    const { key } = await gw.account(1000);
    const res = await gw.request('POST', '/v1/jobs/batch', { key, body: { jobs: [{ kind: VIDEO, input: { prompt: 'a', duration_s: 4, fps: 2 } }, { kind: VIDEO, input: { prompt: 'b', fps: 2 } }] } });
    assert.equal(res.status, 202, res.text);
    const [a, b] = res.body.jobs.map((j: { run_id: string }) => j.run_id);
    assert.deepEqual([(await job(key, a)).cost.reserved, (await job(key, b)).cost.reserved], [14, 362]);
    await finished(key, a);
    await finished(key, b);
    const acct = await balance(key);
    assert.deepEqual([acct.credits, acct.reserved], [1000 - 14 - 5, 0]);
  });

  it("shows each kind's price in /v1/capabilities", async () => {
    const { key } = await gw.account(1);
    const kinds = (await gw.request('GET', '/v1/capabilities', { key })).body.kinds as Array<{ kind: string; price: unknown }>;
    const price = (k: string) => kinds.find((x) => x.kind === k)!.price;
    assert.deepEqual(price(VIDEO), { base: 2, per_second: 3, max_seconds: 120, max: 362 });
    assert.deepEqual(price(LLM_KIND), { ...PRICES[LLM_KIND] });
    assert.deepEqual(price(IMAGE), { base: 4, max: 4 });
  });

  it('refuses a submission past the monthly budget with 402 budget_exceeded, and a new month starts afresh', async () => {
    const { id, key } = await gw.account(1000);
    const set = await gw.request('PUT', `/v1/admin/accounts/${id}/budget`, { body: { budget: 10 }, headers: ADMIN });
    assert.equal(set.status, 200, set.text);
    assert.equal(set.body.account.budget.monthly, 10);
    const jobs = gw.services.jobs;
    const real = jobs.clock;
    const mid = Date.parse('2031-03-15T12:00:00Z');
    jobs.clock = () => mid;
    try {
      const image = (p: string) => gw.submit(key, { kind: IMAGE, input: { prompt: p } });
      const first = (await image('a')).body.run_id as string;
      const second = (await image('b')).body.run_id as string;
      const third = await image('c');
      assert.equal(third.status, 402);
      assert.equal(errorCode(third), 'budget_exceeded');
      assert.deepEqual(third.body.error.details, { budget: 10, spent: 0, reserved: 8, period: '2031-03', needed: 4 });
      // Both succeed this month: 8 spent, nothing held, and still no room for 4 more.
      for (const runId of [first, second]) {
        const run = (await gw.stores.runs.get(runId))!;
        await gw.stores.runs.transition(run, { from: ['queued'], to: 'running' });
        await gw.stores.runs.transition(run, { from: ['running'], to: 'succeeded', set: { output: { urls: [] }, finished_at: '2031-03-16T00:00:00.000Z' } });
      }
      const later = await image('d');
      assert.equal(later.status, 402);
      assert.deepEqual(later.body.error.details, { budget: 10, spent: 8, reserved: 0, period: '2031-03', needed: 4 });
      const b = await balance(key);
      assert.deepEqual([b.credits, b.reserved], [992, 0], 'a refused submission holds nothing');
      // April: what March spent is no part of it.
      jobs.clock = () => Date.parse('2031-04-01T00:00:01Z');
      assert.equal((await image('e')).status, 202);
      // Removing the budget lifts it.
      assert.equal((await gw.request('PUT', `/v1/admin/accounts/${id}/budget`, { body: { budget: null }, headers: ADMIN })).body.account.budget, null);
    } finally {
      jobs.clock = real;
    }
  });

  it('refuses a bad budget and an unknown account', async () => {
    const bad = await gw.request('PUT', '/v1/admin/accounts/acct_01HZZZZZZZZZZZZZZZZZZZZZZZ/budget', { body: { budget: -1 }, headers: ADMIN });
    assert.equal(bad.status, 400);
    const missing = await gw.request('PUT', '/v1/admin/accounts/acct_01HZZZZZZZZZZZZZZZZZZZZZZZ/budget', { body: { budget: 5 }, headers: ADMIN });
    assert.equal(missing.status, 404);
  });
});
