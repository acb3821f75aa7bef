import assert from 'node:assert/strict';
import { generateWhole } from '../sdk/engines/demo/ranked-llm.js';
import { ADMIN_TOKEN, TestGateway, cleanupPrefix, uniquePrefix, until } from './helpers/harness.js';
import { RankWorker } from './helpers/rank-worker.js';

const LLM = 'inference:llm:text-generate';
const MODEL = 'demo-ranked-llm';
const admin = { authorization: `Bearer ${ADMIN_TOKEN}` };

/**
 * Gang leasing on one gateway instance (docs/ranks.md, "Gang leasing"): a ranked model's job is
 * leased as one pipeline of rank leases, its activations carried rank to rank as binary frames,
 * and the split run gives the bytes the whole model gives.
 */
describe('pipeline leases: a ranked job runs split across rank workers', function () {
  this.timeout(60_000);
  const prefix = uniquePrefix('pipeline-lease');
  let gw: TestGateway;
  let key: string;
  let token: string;
  const workers: RankWorker[] = [];
  const rank = async (index: number, count = 3) => {
    const w = await new RankWorker(gw.url, token, { index, count }).connect();
    workers.push(w);
    return w;
  };

  before(async () => {
    gw = await new TestGateway(prefix).start();
    ({ key } = await gw.account(1000));
    token = await gw.workerToken('open');
    const res = await gw.request('PUT', `/v1/admin/models/${LLM}/${MODEL}`, { headers: admin, body: { description: 'the demo model in 3 stages', ranks: 3 } });
    assert.ok(res.status < 300, res.text);
  });
  after(async () => {
    for (const w of workers) w.close();
    await gw.stop();
    await cleanupPrefix(prefix);
  });

  it('three rank workers give the text the whole model gives', async () => {
    const [r0, r1, r2] = [await rank(0), await rank(1), await rank(2)];
    const res = await gw.submit(key, { kind: LLM, input: { prompt: 'hello world', model: MODEL, max_tokens: 12 } });
    assert.equal(res.status, 202, res.text);
    const id = res.body.run_id as string;
    const job = await until('the run finished', async () => {
      const r = (await gw.request('GET', `/v1/jobs/${id}`, { key })).body;
      return r.status === 'succeeded' || r.status === 'failed' ? r : null;
    }, 20_000);
    assert.equal(job.status, 'succeeded', JSON.stringify(job.error));
    const whole = generateWhole('hello world', 12);
    assert.equal(job.output.text, whole.text);
    assert.equal(job.output.finish_reason, whole.finish);
    const leases = [r0, r1, r2].map((w) => w.json.find((f) => f.type === 'lease')!);
    assert.deepEqual(leases.map((l) => l.rank.index), [0, 1, 2]);
    assert.equal(new Set(leases.map((l) => l.rank.pipeline_id)).size, 1, 'one pipeline');
    assert.deepEqual(leases[0].rank.workers, [r0.workerId, r1.workerId, r2.workerId]);
    assert.equal(leases[0].input.prompt, 'hello world');
    assert.deepEqual(leases[1].input, {}, 'a middle rank never sees the input');
    assert.deepEqual(leases[2].input, {}, 'nor does the last');
    // Counted: one pipeline formed and finished, its frames forwarded on this instance. The end
    // is counted once the last rank's settlement returns, just after the run shows succeeded.
    let metrics = '';
    const sample = (line: string) => Number(new RegExp(`^${line.replace(/[{}"]/g, (c) => `\\${c}`)} (\\S+)$`, 'm').exec(metrics)?.[1]);
    await until('the pipeline counted as ended', async () => {
      metrics = (await gw.request('GET', '/metrics')).text;
      return /^switchyard_pipelines_ended_total\{[^}]*\} [1-9]/m.test(metrics);
    });
    assert.equal(sample('switchyard_pipelines_formed_total{kind="inference:llm:text-generate",tier="open"}'), 1);
    assert.equal(sample('switchyard_pipelines_ended_total{end="finished"}'), 1);
    assert.ok(sample('switchyard_pipeline_forwarded_bytes_total{path="local"}') > 0);
  });
});
