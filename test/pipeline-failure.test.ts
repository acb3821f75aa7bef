import assert from 'node:assert/strict';
import { generateWhole } from '../sdk/engines/demo/ranked-llm.js';
import { ADMIN_TOKEN, TestGateway, cleanupPrefix, uniquePrefix, until } from './helpers/harness.js';
import { RankWorker } from './helpers/rank-worker.js';

const LLM = 'inference:llm:text-generate';
const admin = { authorization: `Bearer ${ADMIN_TOKEN}` };

/**
 * A pipeline ends as one (docs/ranks.md, "Failure"): losing any rank stops every rank and the job
 * runs again on a new pipeline, charged once; a cancel reaches every rank; a rank of an ended
 * pipeline is refused by fence.
 */
describe('pipeline failure: a lost rank, a cancel and a stale rank end the whole pipeline', function () {
  this.timeout(60_000);
  const prefix = uniquePrefix('pipeline-failure');
  let gw: TestGateway;
  let key: string;
  let token: string;
  const workers: RankWorker[] = [];
  const rank = async (model: string, index: number, opts: { stallAfter?: number } = {}) => {
    const w = await new RankWorker(gw.url, token, { index, count: 3, model, ...opts }).connect();
    workers.push(w);
    return w;
  };
  const declare = async (model: string) => {
    const res = await gw.request('PUT', `/v1/admin/models/${LLM}/${model}`, { headers: admin, body: { ranks: 3 } });
    assert.ok(res.status < 300, res.text);
  };
  const submit = async (model: string, prompt = 'hello world') => {
    const res = await gw.submit(key, { kind: LLM, input: { prompt, model, max_tokens: 10 } });
    assert.equal(res.status, 202, res.text);
    return res.body.run_id as string;
  };
  const job = async (id: string) => (await gw.request('GET', `/v1/jobs/${id}`, { key })).body;
  const finished = (id: string) => until(`run ${id} finished`, async () => ((await job(id)).terminal ? job(id) : null), 20_000);
  const balance = async () => (await gw.request('GET', '/v1/account', { key })).body;

  before(async () => {
    gw = await new TestGateway(prefix).start();
    ({ key } = await gw.account(1000));
    token = await gw.workerToken('open');
  });
  after(async () => {
    for (const w of workers) w.close();
    await gw.stop();
    await cleanupPrefix(prefix);
  });

  it('a rank worker killed mid-job stops every rank; the job runs again on a new pipeline, charged once, its output whole', async () => {
    await declare('pipe-kill');
    const r0 = await rank('pipe-kill', 0);
    const stuck = await rank('pipe-kill', 1, { stallAfter: 3 });
    const r2 = await rank('pipe-kill', 2);
    const before = await balance();
    const id = await submit('pipe-kill');
    const first = await until('rank 1 is stuck mid-job', async () => (stuck.held.size && [...stuck.held.values()][0].received.length > 3 ? [...stuck.held.values()][0] : null));
    assert.equal((await job(id)).status, 'running');
    stuck.terminate();
    // Every other rank is told its pipeline ended.
    for (const w of [r0, r2]) {
      const cancel = await w.next((f) => f.type === 'cancel' && f.lease_id === w.leases()[0].lease_id);
      assert.equal(cancel.reason, 'pipeline_ended');
      assert.match(cancel.message, /rank 1 was lost/);
    }
    assert.equal((await job(id)).status, 'queued', 'back in its queue');
    const fresh = await rank('pipe-kill', 1);
    const done = await finished(id);
    assert.equal(done.status, 'succeeded', JSON.stringify(done.error));
    assert.equal(done.attempts, 2);
    assert.equal(done.output.text, generateWhole('hello world', 10).text, 'the second pipeline made the whole text');
    const second = [r0, fresh, r2].map((w) => w.leases().at(-1)!);
    assert.equal(new Set(second.map((l) => l.rank.pipeline_id)).size, 1);
    assert.notEqual(second[0].rank.pipeline_id, first.lease.rank.pipeline_id, 'a new pipeline');
    assert.deepEqual(second.map((l) => l.fence), [2, 2, 2], 'under the new fence');
    const after = await balance();
    assert.equal(after.reserved, before.reserved, 'nothing left reserved');
    // Charged once: exactly what a run that never failed costs.
    const clean = await submit('pipe-kill', 'in cat');
    assert.equal((await finished(clean)).status, 'succeeded');
    const cleanCost = after.credits - (await balance()).credits;
    assert.ok(cleanCost > 0);
    assert.equal(before.credits - after.credits, cleanCost);
  });

  it('a cancel reaches every rank and the run ends canceled, its credits back', async () => {
    await declare('pipe-cancel');
    const ranks = [await rank('pipe-cancel', 0), await rank('pipe-cancel', 1, { stallAfter: 2 }), await rank('pipe-cancel', 2)];
    const before = await balance();
    const id = await submit('pipe-cancel');
    await until('the pipeline is mid-job', async () => [...ranks[1].held.values()][0]?.received.length > 2);
    const res = await gw.request('POST', `/v1/jobs/${id}/cancel`, { key });
    assert.ok(res.status < 300, res.text);
    for (const w of ranks) {
      const cancel = await w.next((f) => f.type === 'cancel');
      assert.equal(cancel.run_id, id);
      assert.ok(cancel.reason === 'canceled' || cancel.reason === 'pipeline_ended', cancel.reason);
    }
    const done = await finished(id);
    assert.equal(done.status, 'canceled');
    assert.equal((await balance()).credits, before.credits, 'credits back');
  });

  it('a rank of an ended pipeline, or of an older fence, is refused and reaches no rank', async () => {
    await declare('pipe-stale');
    const r0 = await rank('pipe-stale', 0);
    const stuck = await rank('pipe-stale', 1, { stallAfter: 1 });
    const r2 = await rank('pipe-stale', 2);
    const id = await submit('pipe-stale');
    await until('rank 1 is stuck', async () => [...stuck.held.values()][0]?.received.length > 1);
    const old = r0.leases()[0];
    stuck.terminate();
    await r0.next((f) => f.type === 'cancel' && f.lease_id === old.lease_id);
    // The old lease of rank 0 sends on: refused, by lease and fence.
    const refused = r0.next((f) => f.type === 'error' && f.of === 'frame' && f.lease_id === old.lease_id);
    r0.frame(old.lease_id, Buffer.from('stale activations'));
    assert.equal((await refused).code, 'stale_lease');
    const fresh = await rank('pipe-stale', 1, {});
    const lease = await r0.next((f) => f.type === 'lease' && f.lease_id !== old.lease_id);
    assert.equal(lease.fence, 2);
    // The new lease's id with the old fence: refused too, and the pipeline runs on untouched.
    const wrongFence = r0.next((f) => f.type === 'error' && f.of === 'frame' && f.lease_id === lease.lease_id);
    r0.frame(lease.lease_id, Buffer.from('stale activations'), false, { fence: 1, seq: 1 });
    assert.equal((await wrongFence).code, 'stale_lease');
    const done = await finished(id);
    assert.equal(done.status, 'succeeded', JSON.stringify(done.error));
    assert.equal(done.output.text, generateWhole('hello world', 10).text);
    for (const w of [fresh, r2]) assert.ok(![...w.held.values()].some((h) => h.received.some((p) => p.toString() === 'stale activations')), 'no rank received the stale frame');
  });

  it('a pipeline past its timeout_s is stopped at every rank and the run fails timed_out, its credits back', async () => {
    await declare('pipe-timeout');
    const ranks = [await rank('pipe-timeout', 0), await rank('pipe-timeout', 1, { stallAfter: 1 }), await rank('pipe-timeout', 2)];
    const before = await balance();
    const res = await gw.submit(key, { kind: LLM, input: { prompt: 'hello world', model: 'pipe-timeout', max_tokens: 10 }, timeout_s: 1 });
    assert.equal(res.status, 202, res.text);
    for (const w of ranks) {
      const cancel = await w.next((f) => f.type === 'cancel');
      assert.ok(cancel.reason === 'timed_out' || cancel.reason === 'pipeline_ended', cancel.reason);
    }
    const done = await finished(res.body.run_id);
    assert.equal(done.status, 'failed');
    assert.equal(done.error.code, 'timed_out');
    assert.equal((await balance()).credits, before.credits);
  });
});
