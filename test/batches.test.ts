import assert from 'node:assert/strict';
import { RedisKeys } from '../models/redis/keys.js';
import { RedisRunStore } from '../models/redis/redis-run-store.js';
import { SseClient } from './helpers/sse-client.js';
import { TestGateway, cleanupPrefix, errorCode, uniquePrefix, until } from './helpers/harness.js';

const job = (prompt: string) => ({ kind: 'inference:image:generate', input: { prompt } });
const PRICE = 4; // the catalogue price of inference:image:generate

describe('batches (POST /v1/jobs/batch)', function () {
  this.timeout(60_000);
  const prefix = uniquePrefix('batches');
  const gw = new TestGateway(prefix);
  before(async () => gw.start());
  after(async () => {
    await gw.stop();
    await cleanupPrefix(prefix);
  });

  const balance = async (key: string) => (await gw.request('GET', '/v1/account', { key })).body as { credits: number; reserved: number };
  const listAll = async (key: string, query: string) => {
    const ids: string[] = [];
    let pages = 0;
    for (let cursor: string | null = ''; cursor !== null; pages++) {
      const res: { status: number; text: string; body: any } = await gw.request('GET', `/v1/jobs?${query}&limit=100${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`, { key });
      assert.equal(res.status, 200, res.text);
      ids.push(...res.body.data.map((j: { run_id: string }) => j.run_id));
      cursor = res.body.next_cursor;
    }
    return { ids, pages };
  };

  it('accepts 1,000 jobs at once, lists them all by batch_id, follows them over one stream and cancels them together', async () => {
    const { key } = await gw.account(PRICE * 1000 + 7);
    // Other runs of the account, which the batch listing must not show.
    assert.equal((await gw.submit(key, job('alone'))).status, 202);
    const jobs = Array.from({ length: 1000 }, (_, i) => job(`p${i}`));
    const res = await gw.request('POST', '/v1/jobs/batch', { key, body: { jobs } });
    assert.equal(res.status, 202, res.text);
    const batchId: string = res.body.batch_id;
    assert.match(batchId, /^batch_[0-9A-Z]{26}$/);
    assert.equal(res.headers.get('location'), `/v1/batches/${batchId}`);
    assert.equal(res.body.size, 1000);
    assert.equal(res.body.price, PRICE * 1000);
    assert.equal(res.body.jobs.length, 1000);
    const runIds: string[] = res.body.jobs.map((j: { run_id: string }) => j.run_id);
    assert.deepEqual(await balance(key), { ...(await balance(key)), credits: 3, reserved: PRICE * 1001 });

    // Every run is in its queue, and its view names the batch.
    const one = await gw.request('GET', `/v1/jobs/${runIds[500]}`, { key });
    assert.equal(one.body.batch_id, batchId);
    assert.equal(one.body.status, 'queued');
    assert.equal(one.body.queue_position !== null, true, 'the run is in its queue');

    const listed = await listAll(key, `batch_id=${batchId}`);
    assert.equal(listed.ids.length, 1000);
    assert.deepEqual(new Set(listed.ids), new Set(runIds));
    assert.ok(listed.pages >= 10);
    const queuedOnly = await listAll(key, `batch_id=${batchId}&status=queued`);
    assert.equal(queuedOnly.ids.length, 1000);

    const summary = await gw.request('GET', `/v1/batches/${batchId}`, { key });
    assert.equal(summary.status, 200);
    assert.deepEqual(summary.body, { batch_id: batchId, created_at: res.body.created_at, size: 1000, price: PRICE * 1000, counts: { queued: 1000, running: 0, succeeded: 0, failed: 0, canceled: 0 }, terminal: false });

    const stream = await new SseClient(`${gw.url}/v1/batches/${batchId}/events`, key).open();
    assert.equal(stream.status, 200);
    await stream.until((c) => c.frames.length >= 1000);
    assert.equal(gw.hub.followedRuns, 1, 'one subscription for the whole batch');
    assert.deepEqual(new Set(stream.frames.map((f) => f.data.run_id)), new Set(runIds));

    const canceled = await gw.request('POST', `/v1/batches/${batchId}/cancel`, { key });
    assert.equal(canceled.status, 200, canceled.text);
    assert.deepEqual(canceled.body, { batch_id: batchId, canceled: 1000, cancel_requested: 0, already_terminal: 0 });
    await stream.until((c) => c.frames.some((f) => f.event === 'done'));
    await stream.closed;
    const changes = stream.frames.slice(1000).filter((f) => f.event === 'status');
    assert.equal(changes.length, 1000);
    assert.ok(changes.every((f) => f.data.status === 'canceled' && f.data.batch_id === batchId));
    const done = stream.frames[stream.frames.length - 1];
    assert.equal(done.event, 'done');
    assert.equal(done.data.counts.canceled, 1000);
    assert.equal(done.data.terminal, true);

    const b = await balance(key);
    assert.deepEqual([b.credits, b.reserved], [3 + PRICE * 1000, PRICE], 'every credit of the batch came back');
    // Kept as long as its runs: it expires with its last one, not before.
    const ttl = await gw.redis.ttl(new RedisKeys(gw.config.redisPrefix).batch(batchId));
    assert.ok(ttl > 0 && ttl <= gw.config.runRetentionSeconds, `the batch's ttl: ${ttl}`);
    const again = await gw.request('POST', `/v1/batches/${batchId}/cancel`, { key });
    assert.deepEqual(again.body, { batch_id: batchId, canceled: 0, cancel_requested: 0, already_terminal: 1000 });
  });

  it('resumes a batch stream from Last-Event-ID with the changes it missed, then ends with done', async () => {
    const { key } = await gw.account(1000);
    const res = await gw.request('POST', '/v1/jobs/batch', { key, body: { jobs: [job('a'), job('b'), job('c')] } });
    const [a, b, c] = res.body.jobs.map((j: { run_id: string }) => j.run_id);
    const first = await new SseClient(`${gw.url}/v1/batches/${res.body.batch_id}/events`, key).open();
    await first.until((s) => s.frames.length === 3);
    assert.ok(first.frames.every((f) => f.event === 'status' && f.data.status === 'queued'));
    assert.equal((await gw.request('POST', `/v1/jobs/${a}/cancel`, { key })).status, 200);
    await first.until((s) => s.frames.length === 4);
    const seen = first.frames[3];
    assert.deepEqual([seen.data.run_id, seen.data.status], [a, 'canceled']);
    first.close();
    assert.equal((await gw.request('POST', `/v1/jobs/${b}/cancel`, { key })).status, 200);
    const resumed = await new SseClient(`${gw.url}/v1/batches/${res.body.batch_id}/events`, key, { lastEventId: seen.id }).open();
    await resumed.until((s) => s.frames.length === 1);
    assert.deepEqual([resumed.frames[0].data.run_id, resumed.frames[0].data.status], [b, 'canceled'], 'the change made while away, from the log');
    assert.ok(resumed.frames[0].id > seen.id);
    assert.equal((await gw.request('POST', `/v1/jobs/${c}/cancel`, { key })).status, 200);
    await resumed.closed;
    assert.deepEqual(resumed.frames.map((f) => [f.event, f.data.run_id ?? f.data.batch_id]), [['status', b], ['status', c], ['done', res.body.batch_id]]);
  });

  it('refuses a batch with one invalid job whole: nothing created, nothing reserved, the index reported', async () => {
    const { key } = await gw.account(1000);
    const jobs = [job('a'), job('b'), { kind: 'inference:image:generate', input: { prompt: 7 } }, job('d'), { kind: 'no:such:kind', input: {} }];
    const res = await gw.request('POST', '/v1/jobs/batch', { key, body: { jobs } });
    assert.equal(res.status, 400);
    assert.equal(errorCode(res), 'invalid_request');
    const errors = res.body.error.details.errors as Array<{ index: number; code: string; message: string }>;
    assert.deepEqual(errors.map((e) => [e.index, e.code]), [[2, 'invalid_request'], [4, 'unknown_kind']]);
    assert.deepEqual(await balance(key), { ...(await balance(key)), credits: 1000, reserved: 0 });
    assert.equal((await listAll(key, 'status=queued')).ids.length, 0, 'no run was created');
  });

  it('refuses more than 1,000 jobs with details.max, and file inputs by index', async () => {
    const { key } = await gw.account(100_000);
    const tooMany = await gw.request('POST', '/v1/jobs/batch', { key, body: { jobs: Array.from({ length: 1001 }, (_, i) => job(`p${i}`)) } });
    assert.equal(tooMany.status, 400);
    assert.equal(tooMany.body.error.details.max, 1000);
    const files = await gw.request('POST', '/v1/jobs/batch', { key, body: { jobs: [job('a'), { kind: 'inference:rig', input: { mesh: 'https://example.com/a.glb' } }] } });
    assert.equal(files.status, 400, files.text);
    assert.equal(files.body.error.details.errors[0].index, 1);
    assert.match(files.body.error.details.errors[0].message, /file inputs are not taken in a batch/);
    assert.equal((await balance(key)).reserved, 0);
  });

  it('replays a batch under its Idempotency-Key without reserving twice, and refuses the key with another body', async () => {
    const { key } = await gw.account(1000);
    const body = { jobs: [job('x'), job('y'), job('z')] };
    const headers = { 'idempotency-key': 'batch-key-1' };
    const first = await gw.request('POST', '/v1/jobs/batch', { key, body, headers });
    assert.equal(first.status, 202);
    const second = await gw.request('POST', '/v1/jobs/batch', { key, body, headers });
    assert.equal(second.status, 202);
    assert.equal(second.headers.get('idempotent-replayed'), 'true');
    assert.deepEqual(second.body, first.body);
    assert.deepEqual(await balance(key), { ...(await balance(key)), credits: 1000 - 3 * PRICE, reserved: 3 * PRICE });
    assert.equal((await listAll(key, 'status=queued')).ids.length, 3);
    const other = await gw.request('POST', '/v1/jobs/batch', { key, body: { jobs: [job('x')] }, headers });
    assert.equal(other.status, 409);
    assert.equal(errorCode(other), 'idempotency_conflict');
    assert.equal(other.body.error.details.batch_id, first.body.batch_id);
  });

  it('answers 402 when the balance is short of the total, creating nothing', async () => {
    const { key } = await gw.account(PRICE * 3 - 1);
    const res = await gw.request('POST', '/v1/jobs/batch', { key, body: { jobs: [job('1'), job('2'), job('3')] } });
    assert.equal(res.status, 402);
    assert.equal(errorCode(res), 'insufficient_credits');
    assert.deepEqual(res.body.error.details, { needed: PRICE * 3, available: PRICE * 3 - 1 });
    assert.deepEqual(await balance(key), { ...(await balance(key)), credits: PRICE * 3 - 1, reserved: 0 });
    assert.equal((await listAll(key, 'status=queued')).ids.length, 0);
  });

  it("answers 404 for another account's batch on every route", async () => {
    const owner = await gw.account(1000);
    const other = await gw.account(1000);
    const { batch_id } = (await gw.request('POST', '/v1/jobs/batch', { key: owner.key, body: { jobs: [job('mine')] } })).body;
    for (const [method, path] of [
      ['GET', `/v1/batches/${batch_id}`],
      ['POST', `/v1/batches/${batch_id}/cancel`],
      ['GET', `/v1/batches/${batch_id}/events`],
      ['GET', `/v1/jobs?batch_id=${batch_id}`],
    ]) {
      const res = await gw.request(method, path, { key: other.key });
      assert.equal(res.status, 404, `${method} ${path}`);
    }
    assert.equal((await gw.request('GET', `/v1/batches/${batch_id}`, { key: owner.key })).body.counts.queued, 1);
  });

  it('queues the runs of a batch whose queue write was lost (the reconciler)', async () => {
    const { key } = await gw.account(1000);
    const queues = gw.queues as unknown as { addMany: (runs: unknown[]) => Promise<void> };
    const addMany = queues.addMany;
    queues.addMany = async () => {
      throw new Error('the process died before its queue write');
    };
    let batchId: string;
    try {
      const res = await gw.request('POST', '/v1/jobs/batch', { key, body: { jobs: [job('r1'), job('r2')] } });
      assert.equal(res.status, 202);
      batchId = res.body.batch_id;
    } finally {
      queues.addMany = addMany;
    }
    const runIds = (await listAll(key, `batch_id=${batchId}`)).ids;
    const waiting = async () => (await gw.request('GET', `/v1/jobs/${runIds[0]}`, { key })).body.queue_position;
    assert.equal(await waiting(), null, 'not in its queue yet');
    const reconciler = new (await import('../queues/enqueue-reconciler.js')).EnqueueReconciler({ runs: gw.stores.runs, queues: gw.queues, log: gw.log, afterMs: 0 });
    // One sweep per part of the outbox (a cluster's is read 64 account groups a sweep).
    let enqueued = 0;
    for (let part = 0; part < (gw.stores.runs.outboxParts ?? 1); part++) enqueued += (await reconciler.sweep()).enqueued;
    assert.ok(enqueued >= 2);
    await until('queued by the reconciler', async () => (await waiting()) !== null);
  });
});

describe('batches: a lost status event', function () {
  this.timeout(30_000);
  const prefix = uniquePrefix('batches-lost');
  // Streams re-read their runs every SSE_PING_MS: short here, so the test need not wait 15 s.
  const gw = new TestGateway(prefix, { SSE_PING_MS: '200' });
  before(async () => gw.start());
  after(async () => {
    await gw.stop();
    await cleanupPrefix(prefix);
  });

  it('still ends the batch stream with done once every run has ended (it re-reads its runs)', async () => {
    const { key, id } = await gw.account(1000);
    const res = await gw.request('POST', '/v1/jobs/batch', { key, body: { jobs: [job('a'), job('b')] } });
    const stream = await new SseClient(`${gw.url}/v1/batches/${res.body.batch_id}/events`, key).open();
    await stream.until((s) => s.frames.length === 2);
    // Ended behind the observed store's back, as by a gateway that died before telling anyone.
    const bare = new RedisRunStore(gw.redis, new RedisKeys(gw.config.redisPrefix), { retentionSeconds: 3600, fairShareStep: 10 });
    for (const { run_id } of res.body.jobs) assert.equal((await bare.transition({ run_id, account_id: id }, { from: ['queued'], to: 'canceled' })).ok, true);
    await stream.closed;
    const done = stream.frames[stream.frames.length - 1];
    assert.equal(done.event, 'done');
    assert.equal(done.data.counts.canceled, 2);
    assert.equal(stream.frames.length, 3, 'no status event was logged for them');
  });
});
