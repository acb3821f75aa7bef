import assert from 'node:assert/strict';
import type { Tier } from '../sdk/protocol/index.js';
import { ADMIN_TOKEN, TestGateway, cleanupPrefix, uniquePrefix, until } from './helpers/harness.js';
import { docValidator } from './helpers/openapi-doc.js';
import { RankWorker } from './helpers/rank-worker.js';
import { SseClient } from './helpers/sse-client.js';

const LLM = 'inference:llm:text-generate';
const MODEL = 'wait-pipe';
const admin = { authorization: `Bearer ${ADMIN_TOKEN}` };

/**
 * A queued job of a ranked model says which ranks keep it from running (docs/ranks.md, "Waiting
 * for a pipeline"): `waiting_reason` `no_worker_for_rank` and `waiting_ranks`, the ranks no live
 * worker allowed by the placement rule for its tier could hold, counted over every instance.
 * The rank workers hold any lease they get without finishing it, so the assertions hold whether
 * or not a complete pipeline leases the job.
 */
describe('ranked models: a queued job names the ranks it waits for', function () {
  this.timeout(60_000);
  const prefix = uniquePrefix('ranked-waiting');
  let a: TestGateway;
  let b: TestGateway;
  let key: string;
  let open: string;
  let trusted: string;
  const workers: RankWorker[] = [];

  /** A worker on `gw` serving rank `index` of MODEL (3 ranks), holding its leases unfinished. */
  const rankWorker = async (gw: TestGateway, tier: Tier, index: number) => {
    const w = await new RankWorker(gw.url, tier === 'open' ? open : trusted, { tier, index, count: 3, model: MODEL, auto: false }).connect();
    workers.push(w);
  };
  const declare = async (body: object) => {
    const res = await a.request('PUT', `/v1/admin/models/${LLM}/${MODEL}`, { headers: admin, body: { description: 'a model in 3 stages', ranks: 3, ...body } });
    assert.ok(res.status < 300, res.text);
  };
  const submit = async (confidentiality: Tier) => {
    const res = await a.submit(key, { kind: LLM, confidentiality, input: { prompt: 'hi', model: MODEL } });
    assert.equal(res.status, 202, res.text);
    return res.body.run_id as string;
  };
  const job = async (id: string) => (await a.request('GET', `/v1/jobs/${id}`, { key })).body;
  /** Waits until the job, read on instance A, is queued waiting for exactly `ranks`; returns its view. */
  const waitsFor = (what: string, id: string, ranks: number[]) =>
    until(what, async () => {
      const j = await job(id);
      return j.status === 'queued' && j.waiting_reason === 'no_worker_for_rank' && JSON.stringify(j.waiting_ranks) === JSON.stringify(ranks) ? j : null;
    });
  /** The workers per rank of MODEL that instance A's `/v1/capabilities` shows, by tier. */
  const shownRanks = async () => {
    const caps = (await a.request('GET', '/v1/capabilities', { key })).body;
    const m = caps.kinds.find((k: any) => k.kind === LLM).models.find((x: any) => x.id === MODEL);
    return m?.ranks_available?.map((r: any) => r.workers) ?? null;
  };

  before(async () => {
    a = await new TestGateway(prefix).start();
    b = await new TestGateway(prefix).start();
    ({ key } = await a.account(1000));
    open = await a.workerToken('open', 'contributors');
    trusted = await a.workerToken('trusted', 'vetted');
    await declare({});
  });
  after(async () => {
    for (const w of workers) w.close();
    await a.stop();
    await b.stop();
    await cleanupPrefix(prefix);
  });

  it('lists the missing ranks by the placement rule for the job’s tier, and nothing once every rank is held', async () => {
    const openJob = await submit('open');
    const trustedJob = await submit('trusted');
    // No worker of the kind at all: the ranked reason still comes first, every rank missing.
    await waitsFor('the open job waits for every rank', openJob, [0, 1, 2]);
    await waitsFor('the trusted job waits for every rank', trustedJob, [0, 1, 2]);

    await rankWorker(b, 'open', 0);
    await rankWorker(b, 'trusted', 2);
    const view = await waitsFor('ranks 0 and 2 served (on instance B): the open job waits for rank 1', openJob, [1]);
    assert.equal(view.queue_position, 1);
    const doc = (await a.request('GET', '/v1/openapi.json')).body;
    assert.equal(docValidator(doc)(doc.paths['/v1/jobs/{run_id}'].get.responses['200'].content['application/json'].schema, view), null, 'as the OpenAPI document says');
    await waitsFor('an open worker on rank 0 does not hold rank 0 of a trusted job', trustedJob, [0, 1]);

    const events = await new SseClient(`${a.url}/v1/jobs/${trustedJob}/events`, key).open();
    await events.until((c) => c.frames.length >= 1);
    events.close();
    assert.equal(events.frames[0].event, 'status');
    assert.deepEqual([events.frames[0].data.waiting_reason, events.frames[0].data.waiting_ranks], ['no_worker_for_rank', [0, 1]], 'the first status event carries them too');

    const canceled = (await a.request('POST', `/v1/jobs/${openJob}/cancel`, { key })).body;
    assert.equal(canceled.status, 'canceled');
    assert.deepEqual([canceled.waiting_reason, canceled.waiting_ranks], [null, null], 'a run that is not queued waits for nothing');

    await rankWorker(a, 'open', 1);
    await until('the open rank 1 worker is counted', async () => (await shownRanks())?.[1]?.open === 1);
    await waitsFor('with middle_ranks trusted, an open rank 1 worker does not count for a trusted job', trustedJob, [0, 1]);

    await declare({ middle_ranks: 'open' });
    await waitsFor('with middle_ranks open, the open rank 1 worker counts; rank 0 still needs a vetted worker', trustedJob, [0]);

    await rankWorker(b, 'trusted', 0);
    const done = await until('every rank held: the trusted job runs, or waits with no reason', async () => {
      const j = await job(trustedJob);
      return j.status === 'running' || (j.status === 'queued' && j.waiting_reason === null) ? j : null;
    });
    assert.equal(done.waiting_ranks, null);
  });
});
