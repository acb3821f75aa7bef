import assert from 'node:assert/strict';
import { ADMIN_TOKEN, TestGateway, cleanupPrefix, uniquePrefix, until } from './helpers/harness.js';
import { RankWorker } from './helpers/rank-worker.js';

const LLM = 'inference:llm:text-generate';
const MODEL = 'demo-ranked-llm';
const admin = { authorization: `Bearer ${ADMIN_TOKEN}` };

/**
 * Hard concurrency limits reach ranked models too (docs/jobs.md, "Limits and fairness"): a
 * pipeline is formed only for a job its account, key and kind have a slot for; one past a limit
 * is parked (its seats freed for other accounts' jobs), and formed once the pipeline holding the
 * slot ends.
 */
describe('concurrency limits: ranked jobs are gated when their pipeline forms', function () {
  this.timeout(60_000);
  const prefix = uniquePrefix('limits-ranks');
  let gw: TestGateway;
  let token: string;
  const workers: RankWorker[] = [];
  // Driven by hand (auto: false): a pipeline stays formed until the test ends it.
  const rank = async (index: number) => {
    const w = await new RankWorker(gw.url, token, { index, count: 2, auto: false }).connect();
    workers.push(w);
    return w;
  };

  before(async () => {
    gw = await new TestGateway(prefix).start();
    token = await gw.workerToken('open');
    const res = await gw.request('PUT', `/v1/admin/models/${LLM}/${MODEL}`, { headers: admin, body: { description: 'the demo model in 2 stages', ranks: 2 } });
    assert.ok(res.status < 300, res.text);
  });
  after(async () => {
    for (const w of workers) w.close();
    await gw.stop();
    await cleanupPrefix(prefix);
  });

  it("parks an account's second ranked job at max_running 1, forms another account's meanwhile, and forms the parked one when the first pipeline ends", async () => {
    const a = await gw.account(1000);
    const b = await gw.account(1000);
    const limits = await gw.request('PUT', `/v1/admin/accounts/${a.id}/limits`, { headers: admin, body: { max_running: 1 } });
    assert.equal(limits.status, 200, limits.text);
    // Seats for three pipelines at once: A's second job is fetched (B's ranks ahead of it), and only its limit holds it.
    const firsts = [await rank(0), await rank(0), await rank(0)];
    for (let i = 0; i < 3; i++) await rank(1);
    const submit = async (key: string) => {
      const res = await gw.submit(key, { kind: LLM, input: { prompt: 'hello', model: MODEL, max_tokens: 4 } });
      assert.equal(res.status, 202, res.text);
      return res.body.run_id as string;
    };
    const [a1, a2] = [await submit(a.key), await submit(a.key)];
    const bRun = await submit(b.key);
    const rank0Leases = () => firsts.flatMap((w) => w.leases().map((lease) => ({ w, lease })));

    // A's one slot and B's job: two pipelines; A's other job waits for its limit, not for seats.
    await until('two pipelines formed', async () => rank0Leases().length === 2);
    const runs = rank0Leases().map((l) => l.lease.run_id as string);
    assert.ok(runs.includes(bRun), `B's job formed beside A's (got ${runs.join(', ')})`);
    const [running, parked] = runs.includes(a1) ? [a1, a2] : [a2, a1];
    assert.ok(runs.includes(running));
    await until("A's other job waits for its limit", async () => (await gw.request('GET', `/v1/jobs/${parked}`, { key: a.key })).body.waiting_reason === 'concurrency_limit');
    assert.equal(rank0Leases().length, 2, 'no third pipeline while seats are free');

    // The pipeline holding A's slot ends (its first rank fails for good): the parked job forms.
    const held = rank0Leases().find((l) => l.lease.run_id === running)!;
    const answer = await held.w.report(held.lease.lease_id, { type: 'fail', error: { code: 'engine_error', message: 'broken on purpose', retryable: false } });
    assert.equal(answer.type, 'ack', JSON.stringify(answer));
    await until("A's parked job formed", async () => rank0Leases().some((l) => l.lease.run_id === parked));
    assert.equal((await gw.request('GET', `/v1/jobs/${running}`, { key: a.key })).body.status, 'failed');
    assert.equal((await gw.request('GET', `/v1/jobs/${parked}`, { key: a.key })).body.status, 'running');
  });
});
