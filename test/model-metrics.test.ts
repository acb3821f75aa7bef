import assert from 'node:assert/strict';
import { Exposition } from './helpers/exposition.js';
import { ADMIN_TOKEN, TestGateway, cleanupPrefix, uniquePrefix, until } from './helpers/harness.js';
import { RawWorker } from './helpers/raw-worker.js';
import { RankWorker } from './helpers/rank-worker.js';

const IMAGE = 'inference:image:generate';
const admin = { authorization: `Bearer ${ADMIN_TOKEN}` };

describe('model metrics: jobs by model and jobs no worker can take, in /metrics', function () {
  this.timeout(40_000);
  const prefix = uniquePrefix('model-metrics');
  let gw: TestGateway;
  let key: string;
  let openToken: string;
  const sockets: Array<RawWorker | RankWorker> = [];

  const scrape = async () => new Exposition((await gw.request('GET', '/metrics')).text);
  /** The value of one series, 0 when the gauge has no such series. */
  const value = (e: Exposition, name: string, labels: Record<string, string>) => e.series(name, labels).reduce((n, s) => n + s.value, 0);
  const submit = async (model: string | null, confidentiality = 'open') => {
    const res = await gw.submit(key, { kind: IMAGE, confidentiality, input: { prompt: 'a lighthouse', ...(model ? { model } : {}) } });
    assert.equal(res.status, 202, res.text);
    return res.body.run_id as string;
  };
  const worker = async (models: string[]) => {
    const w = new RawWorker(gw.url, openToken);
    sockets.push(w);
    return w.connect({ protocol: [1, 2, 3], kinds: [IMAGE], tier: 'open', slots: 1, models: { [IMAGE]: models.map((id) => ({ id })) } });
  };

  before(async () => {
    gw = await new TestGateway(prefix).start();
    ({ key } = await gw.account(100_000));
    openToken = await gw.workerToken('open', 'metrics-open');
    for (const id of ['sd3-medium', 'sdxl']) {
      assert.equal((await gw.request('PUT', `/v1/admin/models/${encodeURIComponent(IMAGE)}/${id}`, { headers: admin, body: {} })).status, 201);
    }
  });
  after(async () => {
    for (const w of sockets) w.terminate();
    await gw.stop();
    await cleanupPrefix(prefix);
  });

  it('counts queued and running jobs per model, keeps the kind totals, and names the jobs no worker serves', async () => {
    const served = await worker(['sdxl']);
    await submit('sd3-medium');
    await submit('sd3-medium');
    await submit('sdxl');
    await submit(null);
    // sdxl's job runs on the worker; the job naming no model waits behind it (one slot).
    const lease = await served.lease();
    assert.equal(lease.input.model, 'sdxl');

    const e = await until('the scrape shows the running sdxl job', async () => {
      const e = await scrape();
      return value(e, 'switchyard_model_jobs', { kind: IMAGE, model: 'sdxl', state: 'running' }) === 1 ? e : undefined;
    });
    assert.equal(value(e, 'switchyard_model_jobs', { kind: IMAGE, model: 'sdxl', state: 'queued' }), 0);
    assert.equal(value(e, 'switchyard_model_jobs', { kind: IMAGE, model: 'sd3-medium', state: 'queued' }), 2);
    assert.equal(value(e, 'switchyard_model_jobs', { kind: IMAGE, model: 'sd3-medium', state: 'running' }), 0);
    assert.equal(e.series('switchyard_model_jobs', { kind: IMAGE }).filter((s) => !['sdxl', 'sd3-medium'].includes(s.labels.model)).length, 0, 'jobs naming no model have no model series');
    // The kind's gauge still counts every job of the tier, model queues included.
    const kindQueued = ['waiting', 'prioritized'].reduce((n, state) => n + value(e, 'switchyard_queue_jobs', { kind: IMAGE, tier: 'open', state }), 0);
    assert.equal(kindQueued, 3);
    assert.equal(value(e, 'switchyard_queue_jobs', { kind: IMAGE, tier: 'open', state: 'active' }), 1);
    // Stranded: sd3-medium has no worker; sdxl's worker is busy, but it serves the model.
    assert.equal(value(e, 'switchyard_model_jobs_without_worker', { kind: IMAGE, model: 'sd3-medium' }), 2);
    assert.equal(value(e, 'switchyard_model_jobs_without_worker', { kind: IMAGE, model: 'sdxl' }), 0);
    await served.complete(lease);
  });

  it('counts a job as without worker when the model is served only below its tier, and clears it when a worker brings the model', async () => {
    await submit('sdxl', 'trusted');
    await until('the trusted sdxl job is counted as stranded', async () => value(await scrape(), 'switchyard_model_jobs_without_worker', { kind: IMAGE, model: 'sdxl' }) === 1);
    await worker(['sd3-medium']);
    await until('sd3-medium jobs are no longer counted as stranded', async () => value(await scrape(), 'switchyard_model_jobs_without_worker', { kind: IMAGE, model: 'sd3-medium' }) === 0);
  });

  it('counts a ranked model\'s job as without worker while one of its ranks has none, though the other ranks have', async () => {
    const LLM = 'inference:llm:text-generate';
    assert.ok((await gw.request('PUT', `/v1/admin/models/${LLM}/pipe-metrics`, { headers: admin, body: { ranks: 2 } })).status < 300);
    const rank = async (index: number) => {
      const w = await new RankWorker(gw.url, openToken, { index, count: 2, model: 'pipe-metrics', auto: false }).connect();
      sockets.push(w);
      return w;
    };
    await rank(0);
    const res = await gw.submit(key, { kind: LLM, input: { prompt: 'hi', model: 'pipe-metrics' } });
    assert.equal(res.status, 202, res.text);
    await until('the job waiting for rank 1 is counted', async () => value(await scrape(), 'switchyard_model_jobs_without_worker', { kind: LLM, model: 'pipe-metrics' }) === 1);
    const second = await rank(1);
    await second.next((f) => f.type === 'lease');
    await until('it is no longer counted once the pipeline took it', async () => value(await scrape(), 'switchyard_model_jobs_without_worker', { kind: LLM, model: 'pipe-metrics' }) === 0);
  });
});
