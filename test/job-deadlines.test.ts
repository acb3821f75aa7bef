import assert from 'node:assert/strict';
import type { RedisClient } from '../models/redis-connection.js';
import { RedisKeys } from '../models/redis/keys.js';
import { TestGateway, testRedis, cleanupPrefix, errorCode, uniquePrefix, until } from './helpers/harness.js';
import { docValidator } from './helpers/openapi-doc.js';
import { RawWorker } from './helpers/raw-worker.js';

const IMAGE = 'inference:image:generate';
const VIDEO = 'inference:video:generate';

/**
 * A job's deadlines (docs/jobs.md, "Deadlines"): `ttl_s`, how long it may wait to start, and
 * `timeout_s`, how long an attempt may run; each both ways, with the credits each time.
 */
describe('job deadlines: ttl_s and timeout_s', function () {
  this.timeout(60_000);
  const prefix = uniquePrefix('job-deadlines');
  let gw: TestGateway;
  let key: string;
  let token: string;
  let redis: RedisClient;
  const workers: RawWorker[] = [];

  const job = async (id: string) => (await gw.request('GET', `/v1/jobs/${id}`, { key })).body;
  const balance = async () => (await gw.request('GET', '/v1/account', { key })).body;
  const submit = async (body: Record<string, unknown>) => {
    const res = await gw.submit(key, { kind: IMAGE, input: { prompt: 'a lighthouse' }, ...body });
    assert.equal(res.status, 202, res.text);
    return res.body.run_id as string;
  };
  const worker = async () => {
    const w = await new RawWorker(gw.url, token).connect({ kinds: [IMAGE] });
    workers.push(w);
    return w;
  };

  before(async () => {
    gw = await new TestGateway(prefix, { JOB_DEADLINES: JSON.stringify({ [VIDEO]: { ttl_s: 0, timeout_s: 30, max_timeout_s: 60 } }) }).start();
    ({ key } = await gw.account(1000));
    token = await gw.workerToken('open');
    redis = testRedis();
  });
  after(async () => {
    for (const w of workers) w.terminate();
    redis?.disconnect();
    await gw?.stop();
    await cleanupPrefix(prefix);
  });

  it('a job shows its deadlines and when each falls due; past a kind\'s maximum is 400 and nothing is taken', async () => {
    const id = await submit({});
    const j = await job(id);
    assert.deepEqual([j.ttl_s, j.timeout_s], [86_400, 3_600], 'the built-in defaults');
    assert.equal(Date.parse(j.expires_at) - Date.parse(j.created_at), 86_400_000);
    assert.equal(j.timeout_at, null, 'not running');
    const doc = (await gw.request('GET', '/v1/openapi.json')).body;
    assert.equal(docValidator(doc)(doc.paths['/v1/jobs/{run_id}'].get.responses['200'].content['application/json'].schema, j), null);
    const asked = await job(await submit({ ttl_s: 30, timeout_s: 10 }));
    assert.deepEqual([asked.ttl_s, asked.timeout_s], [30, 10]);
    const video = await gw.submit(key, { kind: VIDEO, input: { prompt: 'waves' } });
    assert.equal(video.status, 202, video.text);
    assert.deepEqual([(await job(video.body.run_id)).ttl_s, (await job(video.body.run_id)).expires_at], [null, null], 'JOB_DEADLINES: no ttl for video');
    const before = await balance();
    const tooLong = await gw.submit(key, { kind: VIDEO, input: { prompt: 'waves' }, timeout_s: 61 });
    assert.equal(tooLong.status, 400, tooLong.text);
    assert.equal(errorCode(tooLong), 'invalid_request');
    assert.equal(tooLong.body.error.details.path, '/timeout_s');
    assert.equal(errorCode(await gw.submit(key, { kind: IMAGE, input: { prompt: 'x' }, ttl_s: 0 })), 'invalid_request');
    assert.deepEqual(await balance(), before, 'nothing reserved for the refused ones');
    for (const id2 of [id, asked.run_id, video.body.run_id]) await gw.request('POST', `/v1/jobs/${id2}/cancel`, { key });
  });

  it('ttl_s: a job started in time runs and is charged; one not started by then fails expired, its credits back, and is never leased', async () => {
    const w = await worker();
    const before = await balance();
    const inTime = await submit({ ttl_s: 30 });
    const lease = await w.lease();
    assert.equal(lease.run_id, inTime);
    // Started: it leaves the sweep's set, which holds only runs still waiting.
    const expiring = new RedisKeys(prefix).runsExpiring();
    await until('the started run left the set of expiring runs', async () => !(await redis.zrange(expiring, '0', '-1')).some((m) => m.includes(inTime)));
    assert.equal((await w.complete(lease)).type, 'ack');
    assert.equal((await job(inTime)).status, 'succeeded');
    const charged = before.credits - (await balance()).credits;
    assert.ok(charged > 0);
    w.terminate();

    // No worker: the sweep expires it.
    const mid = await balance();
    const late = await submit({ ttl_s: 1 });
    const failed = await until('the queued job expired', async () => ((await job(late)).status === 'failed' ? job(late) : null), 10_000);
    assert.equal(failed.error.code, 'expired');
    assert.equal(failed.error.retryable, false);
    assert.equal(failed.attempts, 0);
    assert.deepEqual([(await balance()).credits, (await balance()).reserved], [mid.credits, mid.reserved], 'its credits came back');
    // A worker that comes later is given the next job, never the expired one.
    const next = await submit({});
    const w2 = await worker();
    assert.equal((await w2.lease()).run_id, next);
    await w2.complete(w2.leases()[0]);
  });

  it('ttl_s: a job fetched past its expiry (the sweep never saw it) fails expired instead of running', async () => {
    // No worker until the job is past its expiry.
    for (const w of workers.splice(0)) w.terminate();
    const id = await submit({ ttl_s: 1 });
    // Taken out of the sweep's set, as an instance that claimed it and died would leave it.
    const keys = new RedisKeys(prefix);
    const members = await redis.zrange(keys.runsExpiring(), '0', '-1');
    const mine = members.find((m) => m.includes(id))!;
    assert.ok(mine);
    assert.equal(await redis.zrem(keys.runsExpiring(), mine), 1);
    const expiresAt = Date.parse((await job(id)).expires_at);
    await until('the job is past its expiry', async () => Date.now() > expiresAt);
    const next = await submit({});
    const w = await worker();
    assert.equal((await w.lease()).run_id, next, 'the fetched expired job went to no worker');
    const failed = await job(id);
    assert.equal(failed.status, 'failed');
    assert.equal(failed.error.code, 'expired');
    await w.complete(w.leases()[0]);
  });

  it('timeout_s: an attempt running past it is canceled at its worker, the run fails timed_out and its credits come back', async () => {
    for (const old of workers.splice(0)) old.terminate();
    const w = await worker();
    const before = await balance();
    const id = await submit({ timeout_s: 1 });
    const lease = await w.lease();
    const running = await job(id);
    assert.equal(running.status, 'running');
    assert.ok(Math.abs(Date.parse(running.timeout_at) - (Date.parse(running.started_at) + 1000)) < 1000, 'timeout_at is the start + timeout_s');
    const cancel = await w.next((f) => f.type === 'cancel' && f.lease_id === lease.lease_id);
    assert.equal(cancel.reason, 'timed_out');
    const failed = await until('the run timed out', async () => ((await job(id)).status === 'failed' ? job(id) : null));
    assert.equal(failed.error.code, 'timed_out');
    assert.equal(failed.timeout_at, null);
    assert.deepEqual([(await balance()).credits, (await balance()).reserved], [before.credits, before.reserved], 'its credits came back');
    assert.equal((await w.complete(lease)).code, 'stale_lease', 'a late completion is refused');
  });
});
