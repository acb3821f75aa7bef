import assert from 'node:assert/strict';
import type { Engine } from '../sdk/engines/types.js';
import { SwitchyardWorker, WorkerRefusedError } from '../sdk/worker/index.js';
import { silentLogger } from '../sdk/worker/logger.js';
import { ADMIN_TOKEN, TestGateway, cleanupPrefix, uniquePrefix, until } from './helpers/harness.js';
import { RawWorker } from './helpers/raw-worker.js';

const LLM = 'inference:llm:text-generate';
const admin = { authorization: `Bearer ${ADMIN_TOKEN}` };
const handler: Engine = async () => ({ artifacts: [], text: 'whole', finish_reason: 'stop' });

/**
 * Protocol 6: a worker advertises that it serves rank i of n of a model (docs/ranks.md). The
 * catalogue records the count and is the authority on it: another count is refused with
 * `rank_mismatch`. Workers of protocol 5 and older keep working, and a rank from one is refused
 * like any field its version does not have.
 */
describe('ranked models: a worker advertises the rank it serves (protocol 6)', function () {
  this.timeout(30_000);
  const prefix = uniquePrefix('ranked-reg');
  let gw: TestGateway;
  let token: string;
  let key: string;
  const workers: SwitchyardWorker[] = [];
  const sockets: RawWorker[] = [];
  const sdkWorker = (models: Record<string, unknown[]>, more: Partial<ConstructorParameters<typeof SwitchyardWorker>[0]> = {}) => {
    const w = new SwitchyardWorker({ gateway: gw.url, token, kinds: [LLM], handler, logger: silentLogger, models: models as never, ...more });
    workers.push(w);
    return w;
  };
  const raw = async (register: Record<string, unknown>) => {
    const w = new RawWorker(gw.url, token);
    sockets.push(w);
    return w.connect({ kinds: [LLM], ...register });
  };
  const refusal = (register: Record<string, unknown>) =>
    raw(register).then(
      () => assert.fail('registered'),
      (e: { frame?: Record<string, any> }) => e.frame!,
    );
  const catalogued = async (id: string) => (await gw.request('GET', `/v1/admin/models/${LLM}/${encodeURIComponent(id)}`, { headers: admin })).body;
  const capabilityOf = async (id: string) => ((await gw.request('GET', '/v1/capabilities', { key })).body.kinds.find((k: any) => k.kind === LLM).models as any[]).find((m) => m.id === id);

  before(async () => {
    gw = await new TestGateway(prefix).start();
    token = await gw.workerToken('open', 'rank-host');
    ({ key } = await gw.account(1000));
  });
  afterEach(async () => {
    for (const w of sockets.splice(0)) w.terminate();
    await Promise.all(workers.splice(0).map((w) => w.stop({ timeoutMs: 0 })));
  });
  after(async () => {
    await gw.stop();
    await cleanupPrefix(prefix);
  });

  it('a worker serving rank 1 of 3 registers on protocol 6, sets the catalogue’s count and shows in /v1/capabilities and /v1/models', async () => {
    const w = sdkWorker({ [LLM]: [{ id: 'tiny-3', rank: { index: 1, count: 3 } }] });
    await w.start();
    assert.deepEqual(w.models, { [LLM]: [{ id: 'tiny-3', rank: { index: 1, count: 3 } }] });
    const entry = await catalogued('tiny-3');
    assert.deepEqual([entry.ranks, entry.middle_ranks, entry.declared], [3, 'trusted', false]);
    const zero = { open: 0, trusted: 0, private: 0 };
    const shown = await until('capabilities to show the rank worker', async () => ((await capabilityOf('tiny-3'))?.workers === 1 ? capabilityOf('tiny-3') : null));
    assert.deepEqual(
      { ranks: shown.ranks, middle_ranks: shown.middle_ranks, ranks_available: shown.ranks_available, pipelines: shown.pipelines },
      {
        ranks: 3,
        middle_ranks: 'trusted',
        ranks_available: [
          { rank: 0, workers: zero },
          { rank: 1, workers: { ...zero, open: 1 } },
          { rank: 2, workers: zero },
        ],
        pipelines: zero,
      },
    );
    const listed = (await gw.request('GET', '/v1/models', { key })).body.data.find((m: any) => m.id === 'tiny-3');
    assert.deepEqual(listed.ranks_available, shown.ranks_available);
    assert.deepEqual([listed.ranks, listed.object, listed.pipelines], [3, 'model', zero]);
    assert.deepEqual((await gw.request('GET', '/v1/models/tiny-3', { key })).body, listed);
    const whole = (await gw.request('GET', '/v1/capabilities', { key })).body.kinds.find((k: any) => k.kind === 'inference:image:generate');
    assert.ok(whole.models.every((m: any) => m.ranks === null && m.pipelines === null), 'whole models say so');
  });

  it('refuses a worker whose rank count is not the catalogue’s, naming the model and both counts, and records nothing of it', async () => {
    await sdkWorker({ [LLM]: [{ id: 'tiny-3', rank: { index: 0, count: 3 } }] }).start();
    const wrong = sdkWorker({ [LLM]: [{ id: 'other-model' }, { id: 'tiny-3', rank: { index: 1, count: 4 } }] });
    const err = await wrong.start().then(
      () => assert.fail('registered'),
      (e: unknown) => e as WorkerRefusedError,
    );
    assert.ok(err instanceof WorkerRefusedError, String(err));
    assert.deepEqual([err.code, err.status], ['rank_mismatch', 4400]);
    assert.match(err.message, /inference:llm:text-generate model tiny-3 is served in 3 ranks in the catalogue, and this worker advertises rank 1 of 4/);
    await wrong.wait().then(
      () => assert.fail('a refused worker ends with its refusal'),
      (e: unknown) => assert.equal((e as WorkerRefusedError).code, 'rank_mismatch'),
    );
    assert.equal((await gw.request('GET', `/v1/admin/models/${LLM}/other-model`, { headers: admin })).status, 404, 'nothing of the refused list is recorded');

    const frame = await refusal({ protocol: [6], models: { [LLM]: [{ id: 'tiny-3' }] } });
    assert.equal(frame.code, 'rank_mismatch');
    assert.deepEqual(frame.details, { path: `/models/${LLM}/0`, kind: LLM, model: 'tiny-3', catalogue_ranks: 3, advertised_ranks: null });
    assert.match(frame.message, /served in 3 ranks in the catalogue, and this worker advertises it whole/);
    // A model new to the catalogue: its first advertisement sets its count.
    await raw({ protocol: [6], models: { [LLM]: [{ id: 'new-llm', rank: { index: 0, count: 2 } }] } });
    assert.equal((await catalogued('new-llm')).ranks, 2);
  });

  it('a models frame with a count the catalogue disagrees with is refused, and the worker keeps its list', async () => {
    await gw.request('PUT', `/v1/admin/models/${LLM}/declared-4`, { headers: admin, body: { ranks: 4, middle_ranks: 'open' } });
    const w = await raw({ protocol: [1, 2, 3, 4, 5, 6], models: { [LLM]: [{ id: 'declared-4', rank: { index: 3, count: 4 } }] } });
    w.send({ type: 'models', models: { [LLM]: [{ id: 'declared-4', rank: { index: 1, count: 2 } }] } });
    const answer = await w.next((f) => f.type === 'models_accepted' || f.type === 'error');
    assert.deepEqual([answer.code, answer.of, answer.details.catalogue_ranks, answer.details.advertised_ranks, answer.details.path], ['rank_mismatch', 'models', 4, 2, `/models/${LLM}/0/rank/count`]);
    assert.deepEqual(gw.dispatcher.localWorkers().find((i) => i.worker_id === w.workerId)!.models, { [LLM]: [{ id: 'declared-4', rank: { index: 3, count: 4 } }] });
    w.send({ type: 'models', models: { [LLM]: [{ id: 'declared-4', rank: { index: 2, count: 4 } }] } });
    assert.equal((await w.next((f) => f.type === 'models_accepted' || f.type === 'error')).type, 'models_accepted');
  });

  it('refuses a rank outside its count, a rank from a worker of protocol 5 or older (as the fields its version lacks), and a rank of a model the catalogue serves whole', async () => {
    const outside = await refusal({ protocol: [6], models: { [LLM]: [{ id: 'x', rank: { index: 3, count: 3 } }] } });
    assert.deepEqual([outside.code, outside.details.path], ['bad_models', `/models/${LLM}/0/rank/index`]);
    const tooMany = await refusal({ protocol: [6], models: { [LLM]: [{ id: 'x', rank: { index: 0, count: 65 } }] } });
    assert.equal(tooMany.code, 'bad_frame');
    const v5 = await refusal({ protocol: [1, 2, 3, 4, 5], models: { [LLM]: [{ id: 'tiny-3', rank: { index: 1, count: 3 } }] } });
    assert.equal(v5.code, 'bad_frame');
    assert.match(v5.message, /rank of tiny-3 needs protocol 6; this connection agreed on 5/);
    assert.equal((await gw.request('GET', `/v1/admin/models/${LLM}/x`, { headers: admin })).status, 404);
    await raw({ protocol: [6], models: { [LLM]: [{ id: 'served-whole' }] } });
    const ranked = await refusal({ protocol: [6], models: { [LLM]: [{ id: 'served-whole', rank: { index: 0, count: 2 } }] } });
    assert.equal(ranked.code, 'rank_mismatch');
    assert.match(ranked.message, /model served-whole is served whole in the catalogue, and this worker advertises rank 0 of 2: .*PUT \/v1\/admin\/models\/inference:llm:text-generate\/served-whole/);
  });

  it('a worker of protocol 5 keeps working: it registers on 5, takes its models and runs a job; its models frame may not carry a rank', async () => {
    const w = await raw({ protocol: [1, 2, 3, 4, 5], models: { [LLM]: [{ id: 'v5-llm' }] } });
    assert.equal(w.frames.find((f) => f.type === 'registered')!.protocol, 5);
    const submitted = await gw.submit(key, { kind: LLM, input: { prompt: 'hi', model: 'v5-llm' } });
    assert.equal(submitted.status, 202, submitted.text);
    const lease = await w.lease();
    assert.equal(lease.input.model, 'v5-llm');
    w.send({ type: 'complete', lease_id: lease.lease_id, fence: lease.fence, output: { urls: [], text: 'ok' } });
    await until('the job succeeded', async () => (await gw.request('GET', `/v1/jobs/${submitted.body.run_id}`, { key })).body.status === 'succeeded');
    w.send({ type: 'models', models: { [LLM]: [{ id: 'v5-llm', rank: { index: 0, count: 2 } }] } });
    const answer = await w.next((f) => f.type === 'models_accepted' || f.type === 'error');
    assert.deepEqual([answer.code, answer.of], ['bad_frame', 'models']);
    assert.match(answer.message, /needs protocol 6/);
    assert.equal((await catalogued('v5-llm')).ranks, null);
  });

  it('the SDK checks a rank before connecting', () => {
    for (const [rank, why] of [
      [{ index: 3, count: 3 }, /rank index of m must be a whole number from 0 to 2/],
      [{ index: 0, count: 1 }, /rank count of m must be a whole number from 2 to 64/],
      [{ index: 0, count: 3, of: 'x' }, /rank of m must be \{index, count\}/],
      [[0, 3], /rank of m must be \{index, count\}/],
    ] as const) {
      assert.throws(() => sdkWorker({ [LLM]: [{ id: 'm', rank }] }), why as RegExp, JSON.stringify(rank));
    }
  });
});
