import assert from 'node:assert/strict';
import { once } from 'node:events';
import WebSocket from 'ws';
import { ADMIN_TOKEN, TestGateway, cleanupPrefix, errorCode, uniquePrefix, until } from './helpers/harness.js';
import { RawWorker, type Frame } from './helpers/raw-worker.js';

const admin = { authorization: `Bearer ${ADMIN_TOKEN}` };
const FAST = { HEARTBEAT_MS: '300', LEASE_TTL_MS: '3000' };
const image = (prompt: string, confidentiality = 'open') => ({ kind: 'inference:image:generate', input: { prompt }, confidentiality });

describe('operator trust: vetting and revocation', function () {
  this.timeout(30_000);
  const prefix = uniquePrefix('optrust');
  // Two instances on one Redis: the admin call lands on A, the worker lives on B.
  const a = new TestGateway(prefix, FAST);
  const b = new TestGateway(prefix, FAST);
  let key: string;
  const workers: RawWorker[] = [];
  const worker = async (gw: TestGateway, token: string, register: Partial<Frame> = {}) => {
    const w = await new RawWorker(gw.url, token).connect(register);
    workers.push(w);
    return w;
  };
  const operator = async (trust: 'open' | 'trusted') => {
    const res = await a.request('POST', '/v1/admin/operators', { body: { name: `op-${trust}`, trust }, headers: admin });
    return { id: res.body.operator.id as string, token: res.body.worker_token as string };
  };
  const setTrust = (id: string, body: unknown, headers: Record<string, string> = admin) => a.request('POST', `/v1/admin/operators/${id}/trust`, { body, headers });
  const job = async (runId: string) => (await a.request('GET', `/v1/jobs/${runId}`, { key })).body;

  before(async () => {
    await a.start();
    await b.start();
    key = (await a.account(10_000)).key;
  });
  afterEach(async () => {
    for (const w of workers.splice(0)) w.terminate();
    // A worker still attached would take the next test's jobs: wait until both instances have let theirs go.
    await until('every worker detached', async () => a.dispatcher.localWorkers().length + b.dispatcher.localWorkers().length === 0);
    for (const q of a.queues.all()) await q.obliterate({ force: true });
  });
  after(async () => {
    await Promise.all([a.stop(), b.stop()]);
    await cleanupPrefix(prefix);
  });

  it('revoking an operator disconnects its trusted worker on another instance at once and requeues its lease', async () => {
    const revoked = await operator('trusted');
    const held = await worker(b, revoked.token, { tier: 'trusted' });
    const runId = (await a.submit(key, image('secret', 'trusted'))).body.run_id;
    const first = await held.lease();
    assert.equal(first.run_id, runId);

    const res = await setTrust(revoked.id, { trust: 'open' });
    assert.equal(res.status, 200);
    assert.deepEqual({ id: res.body.id, trust: res.body.trust }, { id: revoked.id, trust: 'open' });

    const error = await held.next((f) => f.type === 'error');
    assert.equal(error.code, 'trust_revoked');
    assert.equal((await held.closed).code, 4403);
    const requeued = await until('the run back in its queue', async () => {
      const j = await job(runId);
      return j.status === 'queued' && j;
    });
    assert.equal(requeued.attempts, 1, 'the lost lease counted as an attempt');

    const other = await worker(a, (await operator('trusted')).token, { tier: 'trusted' });
    const second = await other.lease();
    assert.deepEqual([second.run_id, second.attempt, second.fence], [runId, 2, 2]);
    await other.complete(second);
    assert.equal((await job(runId)).status, 'succeeded');
  });

  it("a revoked operator's token registers only open workers from then on", async () => {
    const op = await operator('trusted');
    await setTrust(op.id, { trust: 'open' });
    const refused = await new RawWorker(b.url, op.token).connect({ tier: 'trusted' }).then(
      () => assert.fail('registered trusted'),
      (err: Error & { frame: Frame }) => err.frame,
    );
    assert.equal(refused.code, 'forbidden');
    const open = await worker(b, op.token, { tier: 'open' });
    assert.ok(open.workerId);
    const listed = (await a.request('GET', `/v1/admin/operators/${op.id}`, { headers: admin })).body;
    assert.equal(listed.trust, 'open');
  });

  it('refuses trusted to a socket opened before the revocation and registering after it', async () => {
    const op = await operator('trusted');
    const ws = new WebSocket(`${b.url.replace(/^http/, 'ws')}/v1/workers/connect`, { headers: { authorization: `Bearer ${op.token}` } });
    await once(ws, 'open');
    await setTrust(op.id, { trust: 'open' });
    const answer = once(ws, 'message').then(([data]) => JSON.parse(String(data)));
    ws.send(JSON.stringify({ type: 'register', protocol: [1], kinds: ['all'], tier: 'trusted', slots: 1 }));
    assert.equal((await answer).code, 'forbidden');
    const [code] = await once(ws, 'close');
    assert.equal(code, 4403);
  });

  it('leaves the open workers of a revoked operator connected', async () => {
    const op = await operator('trusted');
    const open = await worker(b, op.token, { tier: 'open' });
    const trusted = await worker(b, op.token, { tier: 'trusted' });
    await setTrust(op.id, { trust: 'open' });
    await trusted.closed;
    // Its open sibling still takes work on the same instance.
    const runId = (await a.submit(key, image('public'))).body.run_id;
    assert.equal((await open.lease()).run_id, runId);
  });

  it('vetting promotes an open operator: its token may then register trusted workers', async () => {
    const op = await operator('open');
    await assert.rejects(new RawWorker(b.url, op.token).connect({ tier: 'trusted' }), /trust is open/);
    const res = await setTrust(op.id, { trust: 'trusted' });
    assert.equal(res.status, 200);
    assert.equal(res.body.trust, 'trusted');
    const w = await worker(b, op.token, { tier: 'trusted' });
    const runId = (await a.submit(key, image('secret', 'trusted'))).body.run_id;
    assert.equal((await w.lease()).run_id, runId);
  });

  it('a trusted run waits for a trusted worker while an open worker takes only open work', async () => {
    const open = await worker(b, (await operator('open')).token, { tier: 'open', slots: 2 });
    const trustedRun = (await a.submit(key, image('secret', 'trusted'))).body.run_id;
    const openRun = (await a.submit(key, image('public'))).body.run_id;
    // Submitted after the trusted run, the open one is what the open worker gets; the trusted one stays queued.
    assert.equal((await open.lease()).run_id, openRun);
    assert.equal((await job(trustedRun)).status, 'queued');
    assert.equal(open.leases().length, 1);
    const trusted = await worker(a, (await operator('trusted')).token, { tier: 'trusted' });
    assert.equal((await trusted.lease()).run_id, trustedRun);
  });

  it('workers of account-minted tokens are open whatever they claim', async () => {
    const minted = await a.request('POST', '/v1/account/worker-tokens', { key });
    await assert.rejects(new RawWorker(b.url, minted.body.worker_token).connect({ tier: 'trusted' }), /trust is open/);
  });

  it('lists operators and shows one with its current trust', async () => {
    const first = await operator('trusted');
    const second = await operator('open');
    await setTrust(first.id, { trust: 'open' });
    const list = await a.request('GET', '/v1/admin/operators', { headers: admin });
    assert.equal(list.status, 200);
    const ours = list.body.data.filter((o: { id: string }) => o.id === first.id || o.id === second.id);
    assert.deepEqual(ours.map((o: { id: string; trust: string }) => [o.id, o.trust]), [[first.id, 'open'], [second.id, 'open']]);
    const one = await b.request('GET', `/v1/admin/operators/${second.id}`, { headers: admin });
    assert.equal(one.status, 200);
    assert.deepEqual(Object.keys(one.body).sort(), ['created_at', 'id', 'name', 'trust']);
  });

  it('issues another worker token that carries the operator trust', async () => {
    const op = await operator('trusted');
    const res = await a.request('POST', `/v1/admin/operators/${op.id}/worker-tokens`, { headers: admin });
    assert.equal(res.status, 201);
    assert.equal(res.body.trust, 'trusted');
    assert.notEqual(res.body.worker_token, op.token);
    assert.ok((await worker(b, res.body.worker_token, { tier: 'trusted' })).workerId);
  });

  it('refuses the operator routes without the admin token, for unknown operators and for bad trust values', async () => {
    const op = await operator('open');
    const none = {};
    for (const [method, path, body] of [
      ['GET', '/v1/admin/operators', undefined],
      ['GET', `/v1/admin/operators/${op.id}`, undefined],
      ['POST', `/v1/admin/operators/${op.id}/trust`, { trust: 'trusted' }],
      ['POST', `/v1/admin/operators/${op.id}/worker-tokens`, undefined],
    ] as const) {
      const res = await a.request(method, path, { body, headers: none });
      assert.deepEqual([res.status, errorCode(res)], [401, 'unauthorized'], `${method} ${path}`);
      const wrong = await a.request(method, path, { body, key: 'sy_not-the-admin-token' });
      assert.equal(wrong.status, 401, `${method} ${path} with a wrong token`);
    }
    assert.equal((await a.request('GET', `/v1/admin/operators/${op.id}`, { headers: admin })).body.trust, 'open', 'nothing changed');

    for (const id of ['op_01HZZZZZZZZZZZZZZZZZZZZZZZ', 'op_nope', 'acct_01HZZZZZZZZZZZZZZZZZZZZZZZ']) {
      for (const [method, path, body] of [
        ['GET', `/v1/admin/operators/${id}`, undefined],
        ['POST', `/v1/admin/operators/${id}/trust`, { trust: 'open' }],
        ['POST', `/v1/admin/operators/${id}/worker-tokens`, undefined],
      ] as const) {
        const res = await a.request(method, path, { body, headers: admin });
        assert.deepEqual([res.status, errorCode(res)], [404, 'not_found'], `${method} ${path}`);
      }
    }

    for (const body of [{ trust: 'private' }, { trust: 'TRUSTED' }, {}, { trust: 'open', name: 'x' }, { trust: true }, []]) {
      const res = await setTrust(op.id, body);
      assert.deepEqual([res.status, errorCode(res)], [400, 'invalid_request'], JSON.stringify(body));
    }
    const unparsable = await a.request('POST', `/v1/admin/operators/${op.id}/trust`, { raw: '{"trust":', headers: { ...admin, 'content-type': 'application/json' } });
    assert.equal(unparsable.status, 400);
  });
});
