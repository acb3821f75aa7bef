import assert from 'node:assert/strict';
import { RedisKeys } from '../models/redis/keys.js';
import { ADMIN_TOKEN, cleanupPrefix, errorCode, TestGateway, uniquePrefix, until } from './helpers/harness.js';
import { RawWorker, type Frame } from './helpers/raw-worker.js';

/**
 * Fair shares between accounts and hard concurrency limits (docs/jobs.md, "Limits and
 * fairness"): jobs interleave by rank, a weight of w gets w jobs a round, and a job past its
 * account's, key's or kind's `max_running` is parked (`waiting_reason: concurrency_limit`)
 * without holding up other accounts' jobs, and runs once a slot frees.
 */
describe('concurrency limits and fair shares', function () {
  this.timeout(60_000);
  // A gateway (and queues) per test: one test's leftover backlog must not reach the next's workers.
  let prefix = '';
  const IMAGE = 'inference:image:generate';
  const SFX = 'inference:audio:sfx-generate';
  const admin = { authorization: `Bearer ${ADMIN_TOKEN}` };
  let gw: TestGateway;
  let token: string;
  const workers: RawWorker[] = [];

  beforeEach(async () => {
    prefix = uniquePrefix('limits');
    gw = await new TestGateway(prefix).start();
    token = await gw.workerToken();
  });
  afterEach(async () => {
    for (const w of workers.splice(0)) w.close();
    await gw.stop();
    await cleanupPrefix(prefix);
  });

  const worker = async (slots: number, g = gw): Promise<RawWorker> => {
    const w = await new RawWorker(g.url, token).connect({ slots, kinds: [IMAGE, SFX] });
    workers.push(w);
    return w;
  };
  const submit = async (key: string, body: Record<string, unknown> = {}): Promise<string> => {
    const res = await gw.submit(key, { kind: IMAGE, input: { prompt: 'x' }, ...body });
    assert.equal(res.status, 202, res.text);
    return res.body.run_id as string;
  };
  const submitMany = async (key: string, n: number, body: Record<string, unknown> = {}): Promise<string[]> => {
    const ids: string[] = [];
    for (let i = 0; i < n; i++) ids.push(await submit(key, body));
    return ids;
  };
  const setAccount = async (id: string, body: unknown) => {
    const res = await gw.request('PUT', `/v1/admin/accounts/${id}/limits`, { body, headers: admin });
    assert.equal(res.status, 200, res.text);
    return res.body;
  };
  const job = async (key: string, runId: string) => (await gw.request('GET', `/v1/jobs/${runId}`, { key })).body;
  const waitingFor = (key: string, runId: string, reason: string) => until(`${runId} waiting for ${reason}`, async () => (await job(key, runId)).waiting_reason === reason);

  it("leases the second account's job within two lease cycles of the first account's 200-job burst, with one slot", async () => {
    const a = await gw.account(10_000);
    const b = await gw.account(10_000);
    await submitMany(a.key, 200);
    const bRun = await submit(b.key);
    const w = await worker(1);
    const leased: string[] = [];
    for (let i = 0; i < 2; i++) {
      const lease = await w.lease();
      leased.push(lease.run_id as string);
      assert.equal((await w.complete(lease)).type, 'ack');
    }
    assert.ok(leased.includes(bRun), `B's job is among the first two leases (got ${leased.join(', ')})`);
  });

  it("counts a batch's runs against the submitting key's limit, another account's job not held up behind them", async () => {
    const a = await gw.account(10_000);
    const b = await gw.account(10_000);
    const keyId = (await gw.request('GET', '/v1/account/keys', { key: a.key })).body.data[0].id as string;
    assert.equal((await gw.request('PUT', `/v1/account/keys/${keyId}/limits`, { key: a.key, body: { max_running: 1 } })).status, 200);
    const batch = await gw.request('POST', '/v1/jobs/batch', { key: a.key, body: { jobs: Array.from({ length: 10 }, () => ({ kind: IMAGE, input: { prompt: 'x' } })) } });
    assert.equal(batch.status, 202, batch.text);
    const bRun = await submit(b.key);
    const w = await worker(3);
    await until("B's job leased", async () => w.leases().some((l) => l.run_id === bRun));
    assert.equal(w.leases().length, 2, "one of the batch's runs (the key's limit) and B's");
  });

  it('gives an account of weight 2 two jobs a round to the other account\'s one', async () => {
    const a = await gw.account(10_000);
    const b = await gw.account(10_000);
    await setAccount(a.id, { weight: 2 });
    const aRuns = new Set(await submitMany(a.key, 6, { kind: SFX, input: { prompt: 'x' } }));
    await submitMany(b.key, 6, { kind: SFX, input: { prompt: 'x' } });
    const w = await worker(1);
    const order: string[] = [];
    for (let i = 0; i < 9; i++) {
      const lease = await w.lease();
      order.push(aRuns.has(lease.run_id) ? 'A' : 'B');
      await w.complete(lease);
    }
    assert.equal(order.join(''), 'AABAABAAB');
  });

  it("holds an account to its max_running across workers; its backlog does not delay another account's job; a parked job runs once a slot frees", async () => {
    const a = await gw.account(10_000);
    const b = await gw.account(10_000);
    const limits = await setAccount(a.id, { max_running: 2 });
    assert.equal(limits.max_running, 2);
    const aRuns = await submitMany(a.key, 6);
    // Batch: behind every one of A's jobs in the queue, so only the gate lets it by them.
    const bRun = await submit(b.key, { class: 'batch' });
    const [w1, w2] = [await worker(2), await worker(2)];
    const all = () => [...w1.leases(), ...w2.leases()];
    await until("B's job leased", async () => all().some((l) => l.run_id === bRun));
    const aLeased = () => all().filter((l) => aRuns.includes(l.run_id));
    assert.equal(aLeased().length, 2, 'two of A running');
    const parked = aRuns.filter((r) => !aLeased().some((l) => l.run_id === r));
    await waitingFor(a.key, parked[0], 'concurrency_limit');
    const listed = await gw.request('GET', '/v1/jobs?status=queued', { key: a.key });
    assert.ok(listed.body.data.every((j: { waiting_reason: string }) => j.waiting_reason === 'concurrency_limit'), 'the listing says why too');
    const first = aLeased()[0];
    const holder = w1.leases().includes(first) ? w1 : w2;
    await holder.complete(first);
    await until('a parked job of A leased', async () => aLeased().length === 3);
    const running = await gw.request('GET', '/v1/jobs?status=running', { key: a.key });
    assert.equal(running.body.data.length, 2, 'never more than two running');
  });

  it('limits one API key of an account, not its other keys, and refuses a key limit above the account limit', async () => {
    const a = await gw.account(10_000);
    const second = await gw.request('POST', '/v1/account/keys', { key: a.key, body: { name: 'second' } });
    const keys = (await gw.request('GET', '/v1/account/keys', { key: a.key })).body.data as Array<{ id: string; name: string }>;
    const firstKey = keys.find((k) => k.name !== 'second')!;
    const set = await gw.request('PUT', `/v1/account/keys/${firstKey.id}/limits`, { key: a.key, body: { max_running: 1 } });
    assert.equal(set.status, 200, set.text);
    assert.equal(set.body.keys.find((k: { id: string }) => k.id === firstKey.id).max_running, 1);
    const [k1a, k1b] = await submitMany(a.key, 2);
    const k2 = await submit(second.body.key);
    const w = await worker(3);
    await until("the second key's job leased", async () => w.leases().some((l) => l.run_id === k2));
    assert.equal(w.leases().filter((l) => l.run_id === k1a || l.run_id === k1b).length, 1);
    const waiting = w.leases().some((l) => l.run_id === k1a) ? k1b : k1a;
    await waitingFor(a.key, waiting, 'concurrency_limit');
    await w.complete(w.leases().find((l) => l.run_id !== k2 && l.run_id !== waiting)!);
    await until("the key's parked job leased", async () => w.leases().some((l) => l.run_id === waiting));

    await setAccount(a.id, { max_running: 2 });
    const above = await gw.request('PUT', `/v1/account/keys/${firstKey.id}/limits`, { key: a.key, body: { max_running: 3 } });
    assert.equal(above.status, 400);
    assert.equal(errorCode(above), 'invalid_request');
    const bad = await gw.request('PUT', `/v1/account/keys/${firstKey.id}/limits`, { key: a.key, body: { max_running: 0 } });
    assert.equal(bad.status, 400);
    const missing = await gw.request('PUT', '/v1/account/keys/key_aaaaaaaaaaaaaaaa/limits', { key: a.key, body: { max_running: 1 } });
    assert.equal(missing.status, 404);
    const admin3 = await gw.request('PUT', `/v1/admin/accounts/${a.id}/keys/${firstKey.id}/limits`, { headers: admin, body: { max_running: 3 } });
    assert.equal(admin3.status, 200, 'the admin may');
  });

  it('limits an account per kind, leaving its other kinds free', async () => {
    const a = await gw.account(10_000);
    const set = await gw.request('PUT', '/v1/account/limits', { key: a.key, body: { max_running_by_kind: { [IMAGE]: 1 } } });
    assert.equal(set.status, 200, set.text);
    assert.deepEqual(set.body.max_running_by_kind, { [IMAGE]: 1 });
    const unknown = await gw.request('PUT', '/v1/account/limits', { key: a.key, body: { max_running_by_kind: { 'inference:nope': 1 } } });
    assert.equal(unknown.status, 400);
    const [i1, i2] = await submitMany(a.key, 2);
    const sfx = await submit(a.key, { kind: SFX });
    const w = await worker(3);
    await until('the other kind leased', async () => w.leases().some((l) => l.run_id === sfx));
    assert.equal(w.leases().filter((l) => l.run_id === i1 || l.run_id === i2).length, 1);
    await waitingFor(a.key, w.leases().some((l) => l.run_id === i1) ? i2 : i1, 'concurrency_limit');
    const got = await gw.request('GET', '/v1/account/limits', { key: a.key });
    assert.deepEqual(got.body.max_running_by_kind, { [IMAGE]: 1 });
  });

  it('never runs a parked job that was canceled', async () => {
    const a = await gw.account(10_000);
    await setAccount(a.id, { max_running: 1 });
    const [first, second] = await submitMany(a.key, 2);
    // A free slot: the second job is fetched and parked, not left waiting for a worker.
    const w = await worker(2);
    const lease = await w.lease();
    assert.equal(lease.run_id, first);
    await waitingFor(a.key, second, 'concurrency_limit');
    assert.equal((await gw.request('POST', `/v1/jobs/${second}/cancel`, { key: a.key })).status, 200);
    const third = await submit(a.key);
    await w.complete(lease);
    const next = await w.lease();
    assert.equal(next.run_id, third);
    assert.ok(!w.leases().some((l: Frame) => l.run_id === second));
  });

  it('frees the slot of a lease lost with its worker: the requeued run or the parked one runs next, one at a time', async () => {
    const a = await gw.account(10_000);
    await setAccount(a.id, { max_running: 1 });
    const runs = await submitMany(a.key, 2);
    const lost = await worker(1);
    const first = await lost.lease();
    const w = await worker(2);
    await waitingFor(a.key, runs.find((r) => r !== first.run_id)!, 'concurrency_limit');
    lost.terminate();
    const next = await w.lease();
    assert.ok(runs.includes(next.run_id));
    await waitingFor(a.key, runs.find((r) => r !== next.run_id)!, 'concurrency_limit');
    assert.equal(w.leases().length, 1, 'one running: the limit holds after the loss');
    await w.complete(next);
    const last = await w.lease();
    assert.notEqual(last.run_id, next.run_id);
  });

  it('frees a slot held by a run that is no longer running (a gateway died before releasing it)', async () => {
    const a = await gw.account(10_000);
    await setAccount(a.id, { max_running: 1 });
    // A slot taken a minute ago by a run that does not exist: as a crash would leave it.
    await gw.redis.zadd(new RedisKeys(prefix).runningIn(`a:${a.id}`), Date.now() - 60_000, 'run_00000000000000000000000000');
    const run = await submit(a.key);
    const w = await worker(1);
    const lease = await w.lease();
    assert.equal(lease.run_id, run);
  });

  it("the safety sweep frees a stale slot of a limit whose jobs are all parked (nothing fetched there to be refused)", async () => {
    // A sweep every second (a third of the lease TTL, at least a second).
    const fast = await new TestGateway(uniquePrefix('limits-sweep'), { LEASE_TTL_MS: '3000', HEARTBEAT_MS: '300' }).start();
    try {
      const a = await fast.account(10_000);
      const res = await fast.request('PUT', `/v1/admin/accounts/${a.id}/limits`, { body: { max_running: 1 }, headers: admin });
      assert.equal(res.status, 200);
      const submitted: string[] = [];
      for (let i = 0; i < 2; i++) submitted.push((await fast.submit(a.key, { kind: IMAGE, input: { prompt: 'x' } })).body.run_id as string);
      const w = await new RawWorker(fast.url, await fast.workerToken()).connect({ slots: 2, kinds: [IMAGE] });
      workers.push(w);
      const first = await w.lease();
      await until('the second parked', async () => (await fast.request('GET', `/v1/jobs/${submitted[1]}`, { key: a.key })).body.waiting_reason === 'concurrency_limit');
      // A run that is not running takes the slot the first frees (as a gateway dying after admitting it would leave it).
      await fast.redis.zadd(new RedisKeys(fast.prefix).runningIn(`a:${a.id}`), Date.now() - 60_000, 'run_00000000000000000000000000');
      await w.complete(first);
      const second = await w.lease(20_000);
      assert.equal(second.run_id, submitted[1]);
    } finally {
      await fast.stop();
      await cleanupPrefix(fast.prefix);
    }
  });

  it('holds the limit across two gateway instances on one Redis', async () => {
    const other = await new TestGateway(prefix).start();
    try {
      const a = await gw.account(10_000);
      await setAccount(a.id, { max_running: 2 });
      const runs = await submitMany(a.key, 5);
      const [w1, w2] = [await worker(2), await worker(2, other)];
      const all = () => [...w1.leases(), ...w2.leases()];
      await until('two leased', async () => all().length === 2);
      await waitingFor(a.key, runs.find((r) => !all().some((l) => l.run_id === r))!, 'concurrency_limit');
      assert.equal(all().length, 2, 'no third lease on either instance');
      const done = all()[0];
      await (w1.leases().includes(done) ? w1 : w2).complete(done);
      await until('a third leased once a slot freed', async () => all().length === 3);
    } finally {
      await other.stop();
    }
  });
});
