import assert from 'node:assert/strict';
import { IDEMPOTENCY_TTL_MS } from '../api/services/jobs/job-service.js';
import { fingerprint } from '../api/services/jobs/canonical-json.js';
import { newRunId } from '../models/ids.js';
import { TestGateway, cleanupPrefix, errorCode, uniquePrefix } from './helpers/harness.js';

const body = (prompt = 'a cat') => ({ kind: 'inference:image:generate', input: { prompt } });
const PRICE = 4; // the catalogue price of inference:image:generate

describe('credits and idempotency', () => {
  const prefix = uniquePrefix('credits');
  const gw = new TestGateway(prefix);
  before(async () => gw.start());
  after(async () => {
    await gw.stop();
    await cleanupPrefix(prefix);
  });

  const balance = async (key: string) => (await gw.request('GET', '/v1/account', { key })).body as { credits: number; reserved: number };

  describe('credits', () => {
    it('shows credits and reserved on GET /v1/account', async () => {
      const { id, key } = await gw.account(10, 'acme');
      const res = await gw.request('GET', '/v1/account', { key });
      assert.equal(res.status, 200);
      assert.deepEqual(res.body, { id, name: 'acme', credits: 10, reserved: 0, created_at: res.body.created_at, budget: null });
    });

    it('reserves the price at submission and answers 402 when the balance is short', async () => {
      const { key } = await gw.account(PRICE + 1);
      assert.equal((await gw.submit(key, body())).status, 202);
      assert.deepEqual(await balance(key), { ...(await balance(key)), credits: 1, reserved: PRICE });
      const res = await gw.submit(key, body());
      assert.equal(res.status, 402);
      assert.equal(errorCode(res), 'insufficient_credits');
      assert.deepEqual(res.body.error.details, { needed: PRICE, available: 1 });
    });

    it('never overdraws under 40 concurrent submissions against a balance for 5', async () => {
      const { key } = await gw.account(PRICE * 5 + 3);
      const results = await Promise.all(Array.from({ length: 40 }, (_, i) => gw.submit(key, body(`p${i}`))));
      const statuses = results.map((r) => r.status);
      assert.equal(statuses.filter((s) => s === 202).length, 5);
      assert.equal(statuses.filter((s) => s === 402).length, 35);
      const b = await balance(key);
      assert.deepEqual([b.credits, b.reserved], [3, PRICE * 5]);
      const listed = await gw.request('GET', '/v1/jobs?limit=100', { key });
      assert.equal(listed.body.data.length, 5, 'no run was written for a refused submission');
    });

    it('charges on success, releases on failure, and a duplicate report never charges twice', async () => {
      const { key } = await gw.account(100);
      const ok = (await gw.submit(key, body('ok'))).body.run_id;
      const bad = (await gw.submit(key, body('bad'))).body.run_id;
      const runs = gw.stores.runs;
      const okRun = (await runs.get(ok))!;
      const badRun = (await runs.get(bad))!;
      await runs.transition(okRun, { from: ['queued'], to: 'running' });
      await runs.transition(badRun, { from: ['queued'], to: 'running' });
      // Two reports of the same outcome (a retried worker report), and a late contradicting one.
      for (let i = 0; i < 2; i++) await runs.transition(okRun, { from: ['running'], to: 'succeeded', set: { output: { urls: [] } } });
      await runs.transition(okRun, { from: ['running'], to: 'failed' });
      for (let i = 0; i < 2; i++) await runs.transition(badRun, { from: ['running'], to: 'failed', set: { error: { code: 'engine_error', message: 'x', retryable: false } } });
      const b = await balance(key);
      assert.deepEqual([b.credits, b.reserved], [100 - PRICE, 0]);
      const job = (await gw.request('GET', `/v1/jobs/${ok}`, { key })).body;
      assert.equal(job.status, 'succeeded');
      assert.equal(job.terminal, true);
    });

    it('lets an operator add and take credits, never below zero', async () => {
      const { id, key } = await gw.account(5);
      const admin = { authorization: 'Bearer test-admin-token-0123456789' };
      const add = await gw.request('POST', `/v1/admin/accounts/${id}/credits`, { body: { delta: 10 }, headers: admin });
      assert.equal(add.status, 200);
      assert.equal(add.body.account.credits, 15);
      const over = await gw.request('POST', `/v1/admin/accounts/${id}/credits`, { body: { delta: -16 }, headers: admin });
      assert.equal(over.status, 409);
      assert.equal(errorCode(over), 'conflict');
      assert.equal((await balance(key)).credits, 15);
      const missing = await gw.request('POST', '/v1/admin/accounts/acct_01HZZZZZZZZZZZZZZZZZZZZZZZ/credits', { body: { delta: 1 }, headers: admin });
      assert.equal(missing.status, 404);
    });
  });

  describe('Idempotency-Key', () => {
    it('replays the first 202 for the same key and body, without a second run or charge', async () => {
      const { key } = await gw.account(100);
      const first = await gw.submit(key, body('same'), { 'idempotency-key': 'order-17' });
      const again = await gw.submit(key, { input: { prompt: 'same' }, kind: 'inference:image:generate' }, { 'idempotency-key': 'order-17' });
      assert.equal(first.status, 202);
      assert.equal(again.status, 202);
      assert.deepEqual(again.body, first.body);
      assert.equal(again.headers.get('idempotent-replayed'), 'true');
      assert.equal((await balance(key)).credits, 100 - PRICE);
    });

    it('still replays the first answer after the run has moved on', async () => {
      const { key } = await gw.account(100);
      const first = await gw.submit(key, body('moved'), { 'idempotency-key': 'k-moved' });
      await gw.request('POST', `/v1/jobs/${first.body.run_id}/cancel`, { key });
      const again = await gw.submit(key, body('moved'), { 'idempotency-key': 'k-moved' });
      assert.deepEqual(again.body, first.body);
    });

    it('answers 409 idempotency_conflict for the same key with another body', async () => {
      const { key } = await gw.account(100);
      const first = await gw.submit(key, body('one'), { 'idempotency-key': 'k-conflict' });
      const res = await gw.submit(key, body('two'), { 'idempotency-key': 'k-conflict' });
      assert.equal(res.status, 409);
      assert.equal(errorCode(res), 'idempotency_conflict');
      assert.equal(res.body.error.details.run_id, first.body.run_id);
      assert.equal((await balance(key)).credits, 100 - PRICE);
    });

    it('makes one run from 30 concurrent requests with one key', async () => {
      const { key } = await gw.account(100);
      const results = await Promise.all(Array.from({ length: 30 }, () => gw.submit(key, body('race'), { 'idempotency-key': 'k-race' })));
      assert.ok(results.every((r) => r.status === 202), results.map((r) => r.status).join(','));
      assert.equal(new Set(results.map((r) => r.body.run_id)).size, 1);
      assert.equal((await balance(key)).credits, 100 - PRICE);
      const listed = await gw.request('GET', '/v1/jobs', { key });
      assert.equal(listed.body.data.length, 1);
      const queued = await gw.queuedJob(results[0].body.run_id, 'inference:image:generate');
      assert.ok(queued, 'the one run is queued');
    });

    it('scopes keys per account', async () => {
      const a = await gw.account(100);
      const b = await gw.account(100);
      const ra = await gw.submit(a.key, body('x'), { 'idempotency-key': 'shared' });
      const rb = await gw.submit(b.key, body('x'), { 'idempotency-key': 'shared' });
      assert.notEqual(ra.body.run_id, rb.body.run_id);
    });

    it('lets a key refused for credits be retried once the balance is topped up', async () => {
      const { id, key } = await gw.account(1);
      const refused = await gw.submit(key, body('later'), { 'idempotency-key': 'k-402' });
      assert.equal(refused.status, 402);
      await gw.request('POST', `/v1/admin/accounts/${id}/credits`, { body: { delta: 10 }, headers: { authorization: 'Bearer test-admin-token-0123456789' } });
      const retried = await gw.submit(key, body('later'), { 'idempotency-key': 'k-402' });
      assert.equal(retried.status, 202);
      assert.equal(retried.headers.get('idempotent-replayed'), null);
    });

    // The interleaving `npm run chaos -- --scenario redis-pause` found (docs/reliability.md):
    // request A claims the key for run X and fails before creating it, releasing the key; its
    // retry B, which read A's claim, is on its way to create X; retry C claims the freed key and
    // makes run Y. B's create must not make X beside Y: two charged runs for one key.
    it('makes one run when the claimer releases the key under a retry that read its claim', async () => {
      const { id, key } = await gw.account(100);
      const idemKey = 'k-released';
      const runX = newRunId(id);
      // A's claim, as its request made it before staging its files.
      await gw.stores.idempotency.claim(id, idemKey, fingerprint(body('lost')), runX, IDEMPOTENCY_TTL_MS);
      const store = gw.stores.runs;
      const create = store.create.bind(store);
      let c: Awaited<ReturnType<typeof gw.submit>> | undefined;
      // Just before B's create of X: A fails (its claim released) and C comes and goes.
      store.create = async (run) => {
        if (run.run_id === runX && c === undefined) {
          await gw.stores.idempotency.release(id, idemKey, runX);
          c = await gw.submit(key, body('lost'), { 'idempotency-key': idemKey });
        }
        return create(run);
      };
      try {
        const b = await gw.submit(key, body('lost'), { 'idempotency-key': idemKey });
        assert.equal(c?.status, 202);
        assert.equal(b.status, 202);
        assert.notEqual(c!.body.run_id, runX, 'C claimed the freed key afresh');
        assert.equal(b.body.run_id, c!.body.run_id, 'B answers with the run C made');
        assert.equal(b.headers.get('idempotent-replayed'), 'true');
      } finally {
        store.create = create;
      }
      assert.equal(await store.get(runX), null, 'no run X was made');
      const listed = await gw.request('GET', '/v1/jobs', { key });
      assert.equal(listed.body.data.length, 1);
      assert.equal((await balance(key)).credits, 100 - PRICE, 'charged once');
    });
  });
});
