import assert from 'node:assert/strict';
import type { Engine } from '../sdk/engines/types.js';
import type { Tier, WorkerModels } from '../sdk/protocol/index.js';
import { SwitchyardWorker } from '../sdk/worker/index.js';
import { silentLogger } from '../sdk/worker/logger.js';
import { ADMIN_TOKEN, TestGateway, cleanupPrefix, uniquePrefix, until } from './helpers/harness.js';
import { docValidator } from './helpers/openapi-doc.js';

const LLM = 'inference:llm:text-generate';
const MODEL = 'tiny-pipe';
const admin = { authorization: `Bearer ${ADMIN_TOKEN}` };
const by = (open: number, trusted: number, priv = 0) => ({ open, trusted, private: priv });

/**
 * What the fleet shows of a ranked model (docs/ranks.md, "Seeing ranks"): its workers per rank
 * and tier, and the complete pipelines that could be formed for a job of each tier by the
 * placement rule, summed over every gateway instance; and a rank worker is never handed a job
 * of its model whole.
 */
describe('ranked models: workers per rank and the pipelines they could form, across instances', function () {
  this.timeout(60_000);
  const prefix = uniquePrefix('ranked-fleet');
  let a: TestGateway;
  let b: TestGateway;
  let key: string;
  let open: string;
  let trusted: string;
  const workers = new Map<string, SwitchyardWorker>();
  const ran: string[] = [];
  /** Records the model of each job run whole (a rank lease, `ctx.rank`, is one stage of a pipeline). */
  const handler: Engine = async (_kind, input, ctx) => {
    if (!ctx.rank) ran.push(String(input.model));
    return { artifacts: [], text: 'whole', finish_reason: 'stop' };
  };

  /** A worker serving rank `index` of MODEL (3 ranks), connected to `gw`. */
  const rankWorker = async (name: string, gw: TestGateway, tier: Tier, index: number, more: WorkerModels = {}) => {
    const w = new SwitchyardWorker({ gateway: gw.url, token: tier === 'open' ? open : trusted, tier, kinds: [LLM], handler, logger: silentLogger, models: { [LLM]: [{ id: MODEL, rank: { index, count: 3 } }, ...(more[LLM] ?? [])] } });
    await w.start();
    workers.set(name, w);
  };
  const stop = async (name: string) => {
    await workers.get(name)!.stop({ timeoutMs: 0 });
    workers.delete(name);
  };
  const shown = async (gw: TestGateway) => {
    const caps = await gw.request('GET', '/v1/capabilities', { key });
    const m = caps.body.kinds.find((k: any) => k.kind === LLM).models.find((x: any) => x.id === MODEL);
    return { middle: m.middle_ranks, ranks: m.ranks_available.map((r: any) => r.workers), pipelines: m.pipelines, body: caps.body };
  };
  /** Waits until both instances show `expected` (workers per rank and pipelines), and returns it. */
  const both = async (what: string, expected: { ranks: object[]; pipelines: object; middle?: string }) => {
    for (const gw of [a, b]) {
      await until(`${what} (instance ${gw === a ? 'A' : 'B'})`, async () => {
        const s = await shown(gw);
        try {
          assert.deepEqual({ ranks: s.ranks, pipelines: s.pipelines, ...(expected.middle ? { middle: s.middle } : {}) }, expected);
          return true;
        } catch {
          return false;
        }
      });
    }
  };
  const declare = async (body: object) => assert.equal((await a.request('PUT', `/v1/admin/models/${LLM}/${MODEL}`, { headers: admin, body })).status < 300, true);

  before(async () => {
    a = await new TestGateway(prefix).start();
    b = await new TestGateway(prefix).start();
    ({ key } = await a.account(1000));
    open = await a.workerToken('open', 'contributors');
    trusted = await a.workerToken('trusted', 'vetted');
    await declare({ description: 'a model in 3 stages', ranks: 3 });
  });
  after(async () => {
    await Promise.all([...workers.values()].map((w) => w.stop({ timeoutMs: 0 })));
    await a.stop();
    await b.stop();
    await cleanupPrefix(prefix);
  });

  it('a trusted job needs vetted workers on ranks 0 and 2; an open worker on rank 1 counts for it only with middle_ranks open', async () => {
    await rankWorker('t0', a, 'trusted', 0);
    await both('rank 0 alone forms no pipeline', { ranks: [by(0, 1), by(0, 0), by(0, 0)], pipelines: by(0, 0) });
    await rankWorker('o1', b, 'open', 1);
    await rankWorker('t2', b, 'trusted', 2);
    await both('an open pipeline, and no trusted one while the middle rank is open-only', { ranks: [by(0, 1), by(1, 0), by(0, 1)], pipelines: by(1, 0), middle: 'trusted' });

    await declare({ description: 'a model in 3 stages', ranks: 3, middle_ranks: 'open' });
    await both('the open middle rank now serves trusted jobs', { ranks: [by(0, 1), by(1, 0), by(0, 1)], pipelines: by(1, 1), middle: 'open' });

    await declare({ description: 'a model in 3 stages', ranks: 3 });
    await rankWorker('t1', a, 'trusted', 1);
    await both('a vetted middle worker on instance A completes the trusted pipeline', { ranks: [by(0, 1), by(1, 1), by(0, 1)], pipelines: by(1, 1), middle: 'trusted' });
    await rankWorker('o0', b, 'open', 0);
    await rankWorker('t2b', a, 'trusted', 2);
    await both('two open pipelines, one trusted (rank 0 has one vetted worker)', { ranks: [by(1, 1), by(1, 1), by(0, 2)], pipelines: by(2, 1) });

    await stop('t0');
    await both('without a vetted rank 0, no trusted pipeline', { ranks: [by(1, 0), by(1, 1), by(0, 2)], pipelines: by(1, 0) });
    const { body } = await shown(b);
    const doc = (await b.request('GET', '/v1/openapi.json')).body;
    assert.equal(docValidator(doc)(doc.paths['/v1/capabilities'].get.responses['200'].content['application/json'].schema, body), null, 'as the OpenAPI document says');
    const models = (await a.request('GET', '/v1/models', { key })).body;
    assert.deepEqual(models.data.find((m: any) => m.id === MODEL).pipelines, by(1, 0));
    assert.equal(docValidator(doc)(doc.paths['/v1/models'].get.responses['200'].content['application/json'].schema, models), null);
  });

  it('a worker serving a rank of a model never takes a job of that model whole, while its whole models run', async () => {
    await rankWorker('mixed', a, 'open', 1, { [LLM]: [{ id: 'whole-llm' }] });
    const submit = async (model: string) => {
      const res = await a.submit(key, { kind: LLM, input: { prompt: 'hi', model } });
      assert.equal(res.status, 202, res.text);
      return res.body.run_id as string;
    };
    const status = async (id: string) => (await a.request('GET', `/v1/jobs/${id}`, { key })).body.status;
    // The ranked job goes first: were it routed to rank workers, it would be leased before the other.
    const ranked = await submit(MODEL);
    const whole = await submit('whole-llm');
    await until('the whole model’s job succeeded', async () => (await status(whole)) === 'succeeded');
    // The ranked job runs only as a pipeline (the earlier test's workers may form one), never whole.
    assert.ok(!ran.includes(MODEL), `ran whole: ${ran.join(', ')}`);
  });
});
