import assert from 'node:assert/strict';
import { generateWhole } from '../sdk/engines/demo/ranked-llm.js';
import { GatewayProcess } from './helpers/gateway-process.js';
import { ADMIN_TOKEN, TestGateway, cleanupPrefix, uniquePrefix, until } from './helpers/harness.js';
import { RankWorker } from './helpers/rank-worker.js';

const LLM = 'inference:llm:text-generate';
const admin = { authorization: `Bearer ${ADMIN_TOKEN}` };

/**
 * A pipeline whose ranks are connected to different gateway instances (docs/ranks.md, "Two
 * instances"): ranks are assigned through their instance, activations cross between instances
 * through Redis, and losing an instance's rank ends the pipeline on the others.
 */
describe('pipelines across gateway instances: ranks on instances A and B form one pipeline', function () {
  this.timeout(90_000);
  const prefix = uniquePrefix('pipeline-instances');
  let a: TestGateway;
  let b: TestGateway;
  let key: string;
  let token: string;
  const workers: RankWorker[] = [];
  const rank = async (gw: TestGateway, model: string, index: number, opts: { stallAfter?: number } = {}) => {
    const w = await new RankWorker(gw.url, token, { index, count: 3, model, ...opts }).connect();
    workers.push(w);
    return w;
  };
  const declare = async (model: string) => {
    const res = await a.request('PUT', `/v1/admin/models/${LLM}/${model}`, { headers: admin, body: { ranks: 3 } });
    assert.ok(res.status < 300, res.text);
  };
  const submit = async (gw: TestGateway, model: string, prompt = 'hello world') => {
    const res = await gw.submit(key, { kind: LLM, input: { prompt, model, max_tokens: 12 } });
    assert.equal(res.status, 202, res.text);
    return res.body.run_id as string;
  };
  const job = async (id: string) => (await a.request('GET', `/v1/jobs/${id}`, { key })).body;
  const finished = (id: string) => until(`run ${id} finished`, async () => ((await job(id)).terminal ? job(id) : null), 30_000);

  before(async () => {
    a = await new TestGateway(prefix).start();
    b = await new TestGateway(prefix).start();
    ({ key } = await a.account(1000));
    token = await a.workerToken('open');
  });
  after(async () => {
    for (const w of workers) w.close();
    await a.stop();
    await b.stop().catch(() => {});
    await cleanupPrefix(prefix);
  });

  it('rank 0 and 2 on A, rank 1 on B: the split text equals the whole, every frame crossing twice', async () => {
    await declare('pipe-ab');
    const r0 = await rank(a, 'pipe-ab', 0);
    const r1 = await rank(b, 'pipe-ab', 1);
    const r2 = await rank(a, 'pipe-ab', 2);
    const id = await submit(b, 'pipe-ab');
    const done = await finished(id);
    assert.equal(done.status, 'succeeded', JSON.stringify(done.error));
    assert.equal(done.output.text, generateWhole('hello world', 12).text);
    assert.deepEqual([r0, r1, r2].map((w) => w.leases().length), [1, 1, 1]);
    assert.ok([...r1.held.values()][0].received.length >= 2, 'rank 1 on B received the activations');
  });

  it('rank 0 on A, ranks 1 and 2 on B, the loop back to rank 0 crossing too', async () => {
    await declare('pipe-abb');
    await rank(a, 'pipe-abb', 0);
    await rank(b, 'pipe-abb', 1);
    await rank(b, 'pipe-abb', 2);
    const id = await submit(a, 'pipe-abb', 'in cat');
    const done = await finished(id);
    assert.equal(done.status, 'succeeded', JSON.stringify(done.error));
    assert.equal(done.output.text, generateWhole('in cat', 12).text);
  });

  it('a rank lost on B ends the ranks on A; the job runs again and finishes', async () => {
    await declare('pipe-lost');
    const r0 = await rank(a, 'pipe-lost', 0);
    const stuck = await rank(b, 'pipe-lost', 1, { stallAfter: 2 });
    const r2 = await rank(a, 'pipe-lost', 2);
    const id = await submit(a, 'pipe-lost');
    await until('rank 1 on B is stuck mid-job', async () => [...stuck.held.values()][0]?.received.length > 2);
    stuck.terminate();
    for (const w of [r0, r2]) assert.equal((await w.next((f) => f.type === 'cancel')).reason, 'pipeline_ended');
    await rank(b, 'pipe-lost', 1);
    const done = await finished(id);
    assert.equal(done.status, 'succeeded', JSON.stringify(done.error));
    assert.equal(done.attempts, 2);
    assert.equal(done.output.text, generateWhole('hello world', 12).text);
  });

  it('instance B dies (SIGKILL) holding rank 1: A sees its lease lapse, ends its ranks and the job runs again', async () => {
    // Short leases on both sides, so B's lapse shows within seconds.
    const fast = { LEASE_TTL_MS: '2000', HEARTBEAT_MS: '300' };
    const c = await new TestGateway(prefix, fast).start();
    const dying = await new GatewayProcess({ REDIS_PREFIX: prefix, ...fast }).start();
    try {
      await declare('pipe-dies');
      const r0 = await rank(c, 'pipe-dies', 0);
      const r1 = await new RankWorker(dying.url, token, { index: 1, count: 3, model: 'pipe-dies', stallAfter: 2 }).connect();
      workers.push(r1);
      const r2 = await rank(c, 'pipe-dies', 2);
      const id = await submit(c, 'pipe-dies');
      await until('rank 1 on the dying instance is mid-job', async () => [...r1.held.values()][0]?.received.length > 2).catch(async (err) => {
        throw new Error(`${err.message}: run ${JSON.stringify(await job(id))}, leases ${JSON.stringify([r0, r1, r2].map((w) => [w.json.map((f) => f.type + (f.code ?? "")), [...w.held.values()].map((h) => h.received.length)]))}`);
      });
      await dying.kill();
      r1.terminate();
      for (const w of [r0, r2]) {
        const cancel = await w.next((f) => f.type === 'cancel', 20_000);
        assert.equal(cancel.reason, 'pipeline_ended');
      }
      await rank(c, 'pipe-dies', 1);
      const done = await finished(id);
      assert.equal(done.status, 'succeeded', JSON.stringify(done.error));
      assert.equal(done.output.text, generateWhole('hello world', 12).text);
    } finally {
      await dying.kill();
      await c.stop();
    }
  });
});
