import assert from 'node:assert/strict';
import { createDemoEngine } from '../sdk/engines/demo/index.js';
import { generateWhole } from '../sdk/engines/demo/ranked-llm.js';
import { SwitchyardWorker, silentLogger } from '../sdk/worker/index.js';
import { ADMIN_TOKEN, TestGateway, cleanupPrefix, uniquePrefix, until } from './helpers/harness.js';
import { RankWorker } from './helpers/rank-worker.js';

const LLM = 'inference:llm:text-generate';
const admin = { authorization: `Bearer ${ADMIN_TOKEN}` };

/**
 * Which workers a pipeline is formed from (docs/ranks.md, "Placement" and "Gang leasing"): all
 * ranks or none, and for a trusted job only vetted operators' workers on ranks 0 and n-1, the
 * middle ranks as the model's `middle_ranks` allows.
 */
describe('pipeline placement: a pipeline forms from exactly the workers the placement rule allows', function () {
  this.timeout(60_000);
  const prefix = uniquePrefix('pipeline-placement');
  let gw: TestGateway;
  let key: string;
  let open: string;
  let trusted: string;
  const workers: RankWorker[] = [];
  const rank = async (model: string, index: number, tier: 'open' | 'trusted' = 'open') => {
    const w = await new RankWorker(gw.url, tier === 'open' ? open : trusted, { index, count: 3, model, tier }).connect();
    workers.push(w);
    return w;
  };
  const declare = async (model: string, body: object) => {
    const res = await gw.request('PUT', `/v1/admin/models/${LLM}/${model}`, { headers: admin, body: { ranks: 3, ...body } });
    assert.ok(res.status < 300, res.text);
  };
  const submit = async (model: string, confidentiality = 'open', prompt = 'hello world') => {
    const res = await gw.submit(key, { kind: LLM, confidentiality, input: { prompt, model, max_tokens: 8 } });
    assert.equal(res.status, 202, res.text);
    return res.body.run_id as string;
  };
  const job = async (id: string) => (await gw.request('GET', `/v1/jobs/${id}`, { key })).body;
  const finished = (id: string) => until(`run ${id} finished`, async () => ((await job(id)).terminal ? job(id) : null), 20_000);

  before(async () => {
    gw = await new TestGateway(prefix).start();
    ({ key } = await gw.account(1000));
    open = await gw.workerToken('open', 'contributors');
    trusted = await gw.workerToken('trusted', 'vetted');
  });
  after(async () => {
    for (const w of workers) w.close();
    await gw.stop();
    await cleanupPrefix(prefix);
  });

  it('with one rank absent no rank is leased; the job runs once the rank comes', async () => {
    await declare('pipe-absent', {});
    const r0 = await rank('pipe-absent', 0);
    const r2 = await rank('pipe-absent', 2);
    const id = await submit('pipe-absent');
    // The instance looked at the job and its seats (the job's queue was announced): still no lease.
    await until('the job was announced and looked at', async () => (await job(id)).status === 'queued');
    await gw.request('GET', '/v1/capabilities', { key });
    assert.equal(r0.leases().length + r2.leases().length, 0, 'a partial pipeline holds no slot');
    assert.equal((await job(id)).status, 'queued');
    const r1 = await rank('pipe-absent', 1);
    const done = await finished(id);
    assert.equal(done.status, 'succeeded', JSON.stringify(done.error));
    assert.equal(done.output.text, generateWhole('hello world', 8).text);
    assert.deepEqual([r0, r1, r2].map((w) => w.leases().length), [1, 1, 1]);
  });

  it('an open worker offering rank 0 of a trusted job never gets it; a vetted one does', async () => {
    await declare('pipe-edges', {});
    const open0 = await rank('pipe-edges', 0, 'open');
    const t1 = await rank('pipe-edges', 1, 'trusted');
    const t2 = await rank('pipe-edges', 2, 'trusted');
    const id = await submit('pipe-edges', 'trusted');
    await until('the job is queued', async () => (await job(id)).status === 'queued');
    const t0 = await rank('pipe-edges', 0, 'trusted');
    const done = await finished(id);
    assert.equal(done.status, 'succeeded', JSON.stringify(done.error));
    assert.equal(open0.leases().length, 0, 'the open worker never held rank 0 of a trusted job');
    assert.deepEqual([t0, t1, t2].map((w) => w.leases()[0]?.tier), ['trusted', 'trusted', 'trusted']);
    // An open job may use it.
    const openJob = await submit('pipe-edges', 'open', 'in cat');
    await finished(openJob);
    assert.equal((await job(openJob)).status, 'succeeded');
  });

  it('with middle_ranks open a contributor worker carries rank 1 of a trusted job, and the edges stay vetted', async () => {
    await declare('pipe-middle', { middle_ranks: 'trusted' });
    const t0 = await rank('pipe-middle', 0, 'trusted');
    const o1 = await rank('pipe-middle', 1, 'open');
    const t2 = await rank('pipe-middle', 2, 'trusted');
    const id = await submit('pipe-middle', 'trusted');
    await until('the job is queued', async () => (await job(id)).status === 'queued');
    assert.equal(o1.leases().length, 0, 'middle_ranks trusted: the open worker may not hold rank 1');
    await declare('pipe-middle', { middle_ranks: 'open' });
    // The catalogue is read again within two seconds; a new seat (a reconnect) or the sweep tries again.
    const done = await finished(id);
    assert.equal(done.status, 'succeeded', JSON.stringify(done.error));
    assert.equal(o1.leases().length, 1);
    assert.deepEqual(o1.leases()[0].input, {}, 'the open middle rank never sees the input');
    assert.equal(t0.leases()[0].input.prompt, 'hello world');
    assert.equal(t2.leases().length, 1);
  });

  it('a job waiting for a pipeline holds up no job of another model or kind, on the same workers', async () => {
    await declare('pipe-hol', {});
    const r0 = await rank('pipe-hol', 0);
    const ranked = await submit('pipe-hol');
    // A worker of the same kind and another, serving whole models: their jobs come after the ranked one.
    const whole = new SwitchyardWorker({ gateway: gw.url, token: open, kinds: [LLM, 'inference:image:generate'], handler: createDemoEngine({ delayMs: 0 }), logger: silentLogger });
    await whole.start();
    try {
      const llm = await gw.submit(key, { kind: LLM, input: { prompt: 'hi' } });
      const image = await gw.submit(key, { kind: 'inference:image:generate', input: { prompt: 'a lighthouse' } });
      for (const res of [llm, image]) {
        assert.equal(res.status, 202, res.text);
        const done = await finished(res.body.run_id).catch(async (err) => assert.fail(`${err.message}: ${JSON.stringify(await job(res.body.run_id))}`));
        assert.equal(done.status, 'succeeded', JSON.stringify(done.error));
      }
      const waiting = await job(ranked);
      assert.equal(waiting.status, 'queued');
      assert.equal(waiting.waiting_reason, 'no_worker_for_rank');
      assert.deepEqual(waiting.waiting_ranks, [1, 2]);
      assert.equal(r0.leases().length, 0, 'rank 0 holds no slot while ranks 1 and 2 are missing');
    } finally {
      await whole.stop({ timeoutMs: 0 });
    }
  });
});
