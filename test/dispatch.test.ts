import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import { Job } from 'bullmq';
import { Redis } from 'ioredis';
import { nodeServing, subscribers } from './helpers/redis-nodes.js';
import { ADMIN_TOKEN, TEST_TOOL_SECRET_KEY, TestGateway, cleanupPrefix, sleep, testRedis, uniquePrefix, until } from './helpers/harness.js';
import { RawWorker, type Frame } from './helpers/raw-worker.js';

const FAST = { HEARTBEAT_MS: '300', LEASE_TTL_MS: '3000' };
const image = (prompt = 'x', extra: Record<string, unknown> = {}) => ({ kind: 'inference:image:generate', input: { prompt }, ...extra });
describe('dispatcher wake-up', function () {
  // Leases of an hour make the safety sweep (a third of the lease) run every 20 minutes, so only
  // the `queued` announcement can bring this job to the idle worker within the test.
  const prefix = uniquePrefix('dispatch-wake');
  const gw = new TestGateway(prefix, { LEASE_TTL_MS: '3600000' });
  let w: RawWorker | undefined;
  before(() => gw.start());
  after(async () => {
    w?.terminate();
    await gw.stop();
    await cleanupPrefix(prefix);
  });

  it('wakes an idle worker as soon as a job arrives', async () => {
    const { key } = await gw.account(100);
    w = await new RawWorker(gw.url, await gw.workerToken()).connect();
    const { body } = await gw.submit(key, image());
    const lease = await w.lease(10_000);
    assert.equal(lease.run_id, body.run_id);
  });
});

describe('dispatch to remote workers', function () {
  this.timeout(30_000);
  const prefix = uniquePrefix('dispatch');
  const gw = new TestGateway(prefix, FAST);
  let key: string;
  let openToken: string;
  let trustedToken: string;
  const workers: RawWorker[] = [];
  const worker = async (token: string, register: Partial<Frame> = {}) => {
    const w = await new RawWorker(gw.url, token).connect(register);
    workers.push(w);
    return w;
  };
  const job = async (runId: string, k = key) => (await gw.request('GET', `/v1/jobs/${runId}`, { key: k })).body;
  const balance = async (k = key) => (await gw.request('GET', '/v1/account', { key: k })).body;

  before(async () => {
    await gw.start();
    key = (await gw.account(10_000)).key;
    openToken = await gw.workerToken('open');
    trustedToken = await gw.workerToken('trusted');
  });
  afterEach(async () => {
    for (const w of workers.splice(0)) w.terminate();
    // Let the gateway notice and requeue, then clear every queue so tests do not leak jobs into each other.
    await sleep(50);
    for (const q of gw.queues.all()) await q.obliterate({ force: true });
  });
  after(async () => {
    await gw.stop();
    await cleanupPrefix(prefix);
  });

  it('leases a queued job to a registered worker and completes it, charging once', async () => {
    const before = await balance();
    const { body } = await gw.submit(key, image('lighthouse'));
    const w = await worker(openToken);
    const lease = await w.lease();
    assert.equal(lease.run_id, body.run_id);
    assert.deepEqual(lease.input, { prompt: 'lighthouse' });
    assert.equal(lease.fence, 1);
    assert.equal(lease.attempt, 1);
    assert.match(lease.upload_url, new RegExp(`/v1/leases/${lease.lease_id}/artifacts$`));
    const running = await job(body.run_id);
    assert.equal(running.status, 'running');
    assert.ok(running.started_at);
    assert.equal((await w.report(lease, { type: 'progress', progress: 0.5 })).type, 'ack');
    assert.equal((await job(body.run_id)).progress, 0.5);
    assert.equal((await w.complete(lease, ['https://cdn.example/a.png'])).type, 'ack');
    const done = await job(body.run_id);
    assert.equal(done.status, 'succeeded');
    // A URL elsewhere: the gateway names it and vouches for nothing else (test/output-files.test.ts).
    assert.deepEqual(done.output, { urls: ['https://cdn.example/a.png'], files: [{ url: 'https://cdn.example/a.png', name: 'a.png', content_type: null, size: null, sha256: null }] });
    const after = await balance();
    assert.deepEqual([after.credits, after.reserved], [before.credits - 4, 0]);
    assert.equal((await w.complete(lease)).code, 'stale_lease', 'a second complete is refused');
  });

  it('refuses a complete whose run moved on under a later fence, succeeding nothing and charging nothing', async () => {
    const before = await balance();
    const { body } = await gw.submit(key, image('moved on'));
    const w = await worker(openToken);
    const lease = await w.lease();
    // As if its lock had lapsed and the run been requeued for another lease (the record is the fence).
    const moved = await gw.stores.runs.transition((await gw.stores.runs.get(body.run_id))!, { from: ['running'], fence: lease.fence, to: 'queued', set: { fence: lease.fence + 1 } });
    assert.ok(moved.ok);
    assert.equal((await w.complete(lease)).code, 'stale_lease');
    assert.equal((await job(body.run_id)).status, 'queued');
    const after = await balance();
    assert.deepEqual([after.credits, after.reserved], [before.credits - 4, before.reserved + 4], 'still reserved, not charged');
  });

  it('acknowledges a complete sent again after its answer was lost to an outage, charging once', async () => {
    const before = await balance();
    const { body } = await gw.submit(key, image('answer lost'));
    const w = await worker(openToken);
    const lease = await w.lease();
    const runs = gw.stores.runs;
    const transition = runs.transition;
    // The transition to succeeded happens in Redis, but its reply is lost with the connection.
    runs.transition = async function (this: typeof runs, ...args: Parameters<typeof transition>) {
      const result = await transition.apply(this, args);
      if (args[1].to === 'succeeded') {
        runs.transition = transition;
        throw new Error('Connection is closed.');
      }
      return result;
    } as typeof transition;
    try {
      assert.notEqual((await w.complete(lease)).type, 'ack');
      assert.equal(runs.transition, transition, 'the lost answer was that of the success');
      assert.equal((await w.complete(lease)).type, 'ack', 'the same report, sent again, is acknowledged');
    } finally {
      runs.transition = transition;
    }
    assert.equal((await job(body.run_id)).status, 'succeeded');
    const after = await balance();
    assert.deepEqual([after.credits, after.reserved], [before.credits - 4, before.reserved], 'charged once');
  });

  it('never gives a worker more leases than its slots', async () => {
    const w = await worker(openToken, { slots: 2 });
    const ids = [];
    for (let i = 0; i < 5; i++) ids.push((await gw.submit(key, image(`p${i}`))).body.run_id);
    const first = await w.lease();
    await w.lease();
    await sleep(300);
    assert.equal(w.leases().length, 2, 'two slots, two leases');
    await w.complete(first);
    await w.lease();
    await sleep(200);
    assert.equal(w.leases().length, 3, 'a freed slot takes the next job');
  });

  it('routes by tier: a trusted job never reaches an open worker; workers prefer their own tier', async () => {
    const open = await worker(openToken, { slots: 4 });
    const trustedJob = (await gw.submit(key, image('secret', { confidentiality: 'trusted' }))).body.run_id;
    await sleep(300);
    assert.equal(open.leases().length, 0);
    const openJob = (await gw.submit(key, image('public'))).body.run_id;
    assert.equal((await open.lease()).run_id, openJob);
    open.terminate();
    const trusted = await worker(trustedToken, { tier: 'trusted', slots: 1 });
    assert.equal((await trusted.lease()).run_id, trustedJob);
  });

  it('a trusted worker takes trusted work before older open work', async () => {
    const openJob = (await gw.submit(key, image('older, open'))).body.run_id;
    const trustedJob = (await gw.submit(key, image('newer, trusted', { confidentiality: 'trusted' }))).body.run_id;
    const w = await worker(trustedToken, { tier: 'trusted', slots: 1 });
    const first = await w.lease();
    assert.equal(first.run_id, trustedJob);
    await w.complete(first);
    assert.equal((await w.lease()).run_id, openJob, 'then the open job');
  });

  it('refuses a tier above the token trust, private workers without attestation, and bad tokens', async () => {
    await assert.rejects(new RawWorker(gw.url, openToken).connect({ tier: 'trusted' }), /trust is open/);
    await assert.rejects(new RawWorker(gw.url, trustedToken).connect({ tier: 'private' }), /attestation/);
    await assert.rejects(new RawWorker(gw.url, 'swt_nope').connect(), /401/);
    await assert.rejects(new RawWorker(gw.url, key).connect(), /401/);
  });

  it('answers malformed and unknown frames with error frames and keeps the worker', async () => {
    const w = await worker(openToken);
    for (const [bad, code] of [
      ['not json', 'bad_frame'],
      ['[1,2]', 'unknown_type'],
      [JSON.stringify({ type: 'teleport' }), 'unknown_type'],
      [JSON.stringify({ type: 'progress', lease_id: 'lse_x', fence: 1, progress: 7 }), 'bad_frame'],
      [JSON.stringify({ type: 'complete', lease_id: 'lse_unknown', fence: 1, output: { urls: [] } }), 'stale_lease'],
      [JSON.stringify({ type: 'register', protocol: [1], kinds: ['all'], tier: 'open', slots: 1 }), 'bad_frame'],
    ] as const) {
      const answer = w.next((f) => f.type === 'error');
      w.send(bad);
      assert.equal((await answer).code, code, bad);
    }
    const { body } = await gw.submit(key, image());
    assert.equal((await w.lease()).run_id, body.run_id, 'still served');
  });

  it('requeues the run of a worker that disconnects, and another worker finishes it (attempts = 2, charged once)', async () => {
    const before = await balance();
    const { body } = await gw.submit(key, image());
    const a = await worker(openToken);
    const leaseA = await a.lease();
    a.terminate();
    await until('the run to be queued again', async () => (await job(body.run_id)).status === 'queued');
    const b = await worker(openToken);
    const leaseB = await b.lease();
    assert.equal(leaseB.run_id, body.run_id);
    assert.equal(leaseB.fence, 2);
    // The first worker comes back and reports on its old lease: refused.
    const a2 = await worker(openToken);
    const stale = a2.next((f) => f.type === 'error');
    a2.send({ type: 'complete', lease_id: leaseA.lease_id, fence: leaseA.fence, output: { urls: ['https://stale'] } });
    assert.equal((await stale).code, 'stale_lease');
    await b.complete(leaseB, ['https://fresh']);
    const done = await job(body.run_id);
    assert.equal(done.status, 'succeeded');
    assert.equal(done.attempts, 2);
    assert.deepEqual(done.output.urls, ['https://fresh']);
    assert.equal((await balance()).credits, before.credits - 4);
  });

  it('closes a worker that misses its heartbeats and requeues its lease', async () => {
    const { body } = await gw.submit(key, image());
    const silent = await new RawWorker(gw.url, openToken, { heartbeats: false }).connect();
    workers.push(silent);
    await silent.lease();
    const closed = await silent.closed;
    assert.equal(closed.code, 1006, 'the gateway dropped the silent socket (no close handshake)');
    await until('the run to be queued again', async () => (await job(body.run_id)).status === 'queued');
  });

  it('fails a run with worker_lost after its last attempt, returning its credits', async () => {
    const before = await balance();
    const { body } = await gw.submit(key, image());
    for (let i = 0; i < 3; i++) {
      const w = await worker(openToken);
      await w.lease();
      w.terminate();
      await until(`attempt ${i + 1} to end`, async () => (await job(body.run_id)).status !== 'running');
    }
    const failed = await job(body.run_id);
    assert.equal(failed.status, 'failed');
    assert.equal(failed.error.code, 'worker_lost');
    assert.equal(failed.attempts, 3);
    assert.equal((await balance()).credits, before.credits);
  });

  it('retries a retryable failure and fails a non-retryable one', async () => {
    const w = await worker(openToken);
    const retried = (await gw.submit(key, image('flaky'))).body.run_id;
    const l1 = await w.lease();
    await w.report(l1, { type: 'fail', error: { code: 'oom', message: 'out of memory', retryable: true } });
    const l2 = await w.lease();
    assert.equal(l2.run_id, retried);
    assert.equal(l2.attempt, 2);
    await w.report(l2, { type: 'fail', error: { code: 'bad_prompt', message: 'refused', retryable: false } });
    const failed = await job(retried);
    assert.equal(failed.status, 'failed');
    // A code outside the list (docs/jobs.md, "Error codes") is recorded as engine_error, the worker's own kept beside it.
    assert.deepEqual(failed.error, { code: 'engine_error', reported_code: 'bad_prompt', message: 'refused', retryable: false, attempt: 2 });
  });

  it('delivers a cancel to the worker holding the run; the run ends canceled with credits back', async () => {
    const before = await balance();
    const { body } = await gw.submit(key, image());
    const w = await worker(openToken);
    const lease = await w.lease();
    const cancelFrame = w.next((f) => f.type === 'cancel');
    const res = await gw.request('POST', `/v1/jobs/${body.run_id}/cancel`, { key });
    assert.equal(res.body.status, 'running');
    assert.equal((await cancelFrame).lease_id, lease.lease_id);
    await w.report(lease, { type: 'fail', error: { code: 'canceled', message: 'stopped', retryable: false } });
    const canceled = await job(body.run_id);
    assert.equal(canceled.status, 'canceled');
    assert.equal((await balance()).credits, before.credits);
  });

  it('drops a job whose run was canceled while queued instead of leasing it', async () => {
    const { body } = await gw.submit(key, image());
    await gw.request('POST', `/v1/jobs/${body.run_id}/cancel`, { key });
    // Put the job back as a stray (e.g. a late reconciler add), then connect a worker.
    await gw.queues.add({ ...(await gw.stores.runs.get(body.run_id))! });
    const w = await worker(openToken);
    await sleep(400);
    assert.equal(w.leases().length, 0);
  });

  it('reads capacity, capabilities and LLM availability from the fleet counts, never from each worker record', async () => {
    for (let i = 0; i < 5; i++) await worker(openToken, { kinds: ['inference:llm:text-generate', 'inference:rig'], slots: 2 });
    // monitor() opens a connection of its own beside the client's: both are closed below.
    const client = testRedis('test-monitor');
    // On a cluster, the primary of the prefix's one slot serves every key of the gateway.
    const monitor = await (await nodeServing(client, `${prefix}:fleet:instances`)).monitor();
    const seen: string[] = [];
    monitor.on('monitor', (_time: string, args: string[]) => {
      if (args.some((a) => a.startsWith(`${prefix}:`))) seen.push(args.join(' '));
    });
    try {
      assert.equal((await gw.request('GET', '/v1/network/capacity')).body.workers.total, 5);
      assert.equal((await gw.request('GET', '/v1/capabilities', { key })).body.kinds.find((k: { kind: string }) => k.kind === 'inference:rig').workers, 5);
      assert.equal((await gw.request('GET', '/v1/models', { key })).status, 200);
      const reads = seen.filter((c) => /^(get|mget|hgetall)\b/i.test(c) && c.includes(`${prefix}:worker:`));
      assert.deepEqual(reads, [], 'no per-worker record was read');
      assert.ok(seen.some((c) => c.includes(`${prefix}:fleet:`)), 'the fleet counts were read');
    } finally {
      monitor.disconnect();
      client.disconnect();
    }
  });

  it('reports live workers per kind and tier in /v1/capabilities and /v1/network/capacity', async () => {
    const caps = async () => (await gw.request('GET', '/v1/capabilities', { key })).body.kinds as Array<{ kind: string; workers: number; workers_by_tier: Record<string, number>; input_schema: object }>;
    const image0 = (await caps()).find((k) => k.kind === 'inference:image:generate')!;
    assert.equal(image0.workers, 0);
    assert.ok(image0.input_schema);
    assert.equal((await caps()).length, 11);
    const a = await worker(openToken, { kinds: ['inference:image:generate', 'inference:rig'], slots: 3 });
    const b = await worker(trustedToken, { kinds: ['inference:rig'], tier: 'trusted', slots: 2 });
    const during = await caps();
    assert.equal(during.find((k) => k.kind === 'inference:image:generate')!.workers, 1);
    assert.deepEqual(during.find((k) => k.kind === 'inference:rig')!.workers_by_tier, { open: 1, trusted: 1, private: 0 });
    assert.equal(during.find((k) => k.kind === 'inference:video:generate')!.workers, 0);
    const capacity = async () => (await gw.request('GET', '/v1/network/capacity')).body;
    const before = await capacity();
    assert.deepEqual(before.workers, { total: 2, by_tier: { open: 1, trusted: 1, private: 0 }, unavailable: 0 });
    assert.deepEqual(before.slots, { total: 5, busy: 0, free: 5, unavailable: 0 });
    assert.equal(before.by_kind.find((k: { kind: string }) => k.kind === 'inference:rig').workers, 2);

    // A lease counts as busy from the moment it is sent, and is free again once its report is acknowledged.
    await gw.submit(key, image('busy'));
    const lease = await a.lease();
    const running = await capacity();
    assert.deepEqual(running.slots, { total: 5, busy: 1, free: 4, unavailable: 0 });
    assert.equal(running.by_kind.find((k: { kind: string }) => k.kind === 'inference:image:generate').slots_free, 2);
    await a.complete(lease);
    assert.deepEqual((await capacity()).slots, { total: 5, busy: 0, free: 5, unavailable: 0 });

    // A worker that drops out leaves both views together.
    b.terminate();
    await until('the killed worker to leave /v1/capabilities', async () => (await caps()).find((k) => k.kind === 'inference:rig')!.workers === 1);
    const after = await capacity();
    assert.deepEqual(after.workers, { total: 1, by_tier: { open: 1, trusted: 0, private: 0 }, unavailable: 0 });
    assert.deepEqual(after.slots, { total: 3, busy: 0, free: 3, unavailable: 0 });
    a.close();
    await until('the workers to leave the registry', async () => (await caps()).every((k) => k.workers === 0));
    assert.equal((await gw.request('GET', '/v1/capabilities')).status, 401, 'capabilities need a key');
  });

  it('a fleet-count write failing at register leaves the worker attached and working (not a ghost told not_registered)', async () => {
    const redis = gw.redis;
    const set = redis.hset;
    let failed = 0;
    // The next write of the fleet counts (the new worker's attach) fails, as if Redis had blipped then.
    redis.hset = function (this: typeof redis, ...args: unknown[]) {
      if (String(args[0]).includes(':fleet:{')) {
        redis.hset = set;
        failed++;
        return Promise.reject(new Error('simulated Redis failure'));
      }
      return (set as (...a: unknown[]) => unknown).apply(this, args);
    } as typeof set;
    try {
      const w = await worker(openToken);
      const { body } = await gw.submit(key, image('registry'));
      const lease = await w.lease();
      assert.equal(lease.run_id, body.run_id);
      // Reports are still those of a registered worker.
      assert.equal((await w.complete(lease)).type, 'ack');
      assert.equal((await job(body.run_id)).status, 'succeeded');
      assert.equal(w.frames.filter((f) => f.type === 'error').length, 0, JSON.stringify(w.frames));
      assert.equal(failed, 1, 'the fleet-count write was not the one that failed');
    } finally {
      redis.hset = set;
    }
  });

  it('tells a still-connected worker stale_lease when one of its leases is lost (its lock lapsed)', async () => {
    const w = await worker(openToken, { slots: 2 });
    const kept = (await gw.submit(key, image('kept'))).body.run_id;
    const lost = (await gw.submit(key, image('lost'))).body.run_id;
    const leases = [await w.lease(), await w.lease()];
    const lostLease = leases.find((l) => l.run_id === lost)!;
    const keptLease = leases.find((l) => l.run_id === kept)!;
    // The lost run's BullMQ lock disappears: the next heartbeat cannot extend it.
    let queue;
    for (const q of gw.queues.all()) if (await q.getJob(lost)) queue = q;
    assert.ok(queue);
    const redis = testRedis();
    try {
      assert.equal(await redis.del(queue.toKey(`${lost}:lock`)), 1);
    } finally {
      redis.disconnect();
    }
    const told = await w.next((f) => f.type === 'error' && f.lease_id === lostLease.lease_id);
    assert.deepEqual([told.code, told.run_id], ['stale_lease', lost]);
    await until('the lost run to be requeued or leased again', async () => (await job(lost)).fence === 2 || (await job(lost)).status === 'queued');
    assert.equal((await w.complete(keptLease)).type, 'ack', 'the other lease is untouched');
    assert.equal(w.frames.filter((f) => f.type === 'error' && f.lease_id === keptLease.lease_id).length, 0);
  });

  it('stopping the dispatcher unsubscribes only its own channels from the shared subscriber', async () => {
    const p = uniquePrefix('dispatch-stop');
    const other = await new TestGateway(p, FAST).start();
    const redis = testRedis();
    try {
      const numsub = () => subscribers(redis, [`${p}:chan:operators`, `${p}:chan:queued`, `${p}:chan:cancel`]);
      assert.deepEqual(await numsub(), [1, 1, 1]);
      await other.dispatcher.stop();
      assert.deepEqual(await numsub(), [1, 0, 0], 'the trust channel stays subscribed');
    } finally {
      redis.disconnect();
      await other.stop();
      await cleanupPrefix(p);
    }
  });

  it('does not poll Redis while idle', async () => {
    await worker(openToken);
    await sleep(300);
    // Count the commands this process's Redis clients send (the Redis server may be shared).
    const proto = Redis.prototype as unknown as { sendCommand: (...a: unknown[]) => unknown };
    const original = proto.sendCommand;
    let commands = 0;
    proto.sendCommand = function (this: unknown, ...args: unknown[]) {
      commands++;
      return original.apply(this, args);
    };
    try {
      await sleep(1500);
    } finally {
      proto.sendCommand = original;
    }
    // Heartbeats (every 300 ms here), the registry refresh and the safety sweep: a few dozen, not
    // thousands. The sweep reads each queue the workers serve (three reads) and each queue's
    // stalled checker runs every 1.5 s: the gateway's queues, not its workers, set that count
    // (a split queue's partitions each count: QUEUE_PARTITIONS).
    const served = new Set(gw.dispatcher.localWorkers().flatMap((w) => gw.dispatcher.workersOf(w.owner).flatMap((c) => c.queues.flat()))).size;
    assert.ok(commands > 0, "the counter sees the heartbeat traffic");
    assert.ok(commands < 150 + 8 * served, `${commands} Redis commands in 1.5 s of idling, ${served} queues served`);
  });
});

describe('dispatch across gateway instances and crashes', function () {
  this.timeout(60_000);

  it('a job submitted on B runs on a worker connected to A; a cancel sent to B reaches it', async () => {
    const prefix = uniquePrefix('dispatch2');
    const a = await new TestGateway(prefix, FAST).start();
    const b = await new TestGateway(prefix, FAST).start();
    try {
      const { key } = await b.account(100);
      const w = await new RawWorker(a.url, await a.workerToken()).connect();
      const { body } = await b.submit(key, image());
      const lease = await w.lease();
      assert.equal(lease.run_id, body.run_id);
      const cancel = w.next((f) => f.type === 'cancel');
      await b.request('POST', `/v1/jobs/${body.run_id}/cancel`, { key });
      assert.equal((await cancel).run_id, body.run_id);
      await w.report(lease, { type: 'fail', error: { code: 'canceled', message: 'ok', retryable: false } });
      assert.equal((await b.request('GET', `/v1/jobs/${body.run_id}`, { key })).body.status, 'canceled');
      w.terminate();
    } finally {
      await a.stop();
      await b.stop();
      await cleanupPrefix(prefix);
    }
  });

  it('at shutdown, tells workers to drain and lets a running lease finish', async () => {
    const prefix = uniquePrefix('dispatch-drain');
    const gw = await new TestGateway(prefix, { ...FAST, SHUTDOWN_DRAIN_MS: '5000' }).start();
    try {
      const { key } = await gw.account(100);
      const w = await new RawWorker(gw.url, await gw.workerToken()).connect();
      const { body } = await gw.submit(key, image());
      const lease = await w.lease();
      const drain = w.next((f) => f.type === 'drain');
      const stopping = gw.dispatcher.stop(5000);
      await drain;
      assert.equal((await w.complete(lease, ['https://drained'])).type, 'ack');
      await stopping;
      assert.equal((await gw.stores.runs.get(body.run_id))?.status, 'succeeded');
      w.terminate();
    } finally {
      await gw.stop();
      await cleanupPrefix(prefix);
    }
  });

  it('at shutdown, a drained worker is answered its complete before its socket closes, however long BullMQ takes to finish the job', async () => {
    const prefix = uniquePrefix('dispatch-drain-answer');
    const gw = await new TestGateway(prefix, { ...FAST, SHUTDOWN_DRAIN_MS: '5000' }).start();
    const moveToCompleted = Job.prototype.moveToCompleted;
    try {
      const { key } = await gw.account(100);
      const w = await new RawWorker(gw.url, await gw.workerToken()).connect();
      const { body } = await gw.submit(key, image());
      const lease = await w.lease();
      // The run is recorded first (its slot freed then); BullMQ's finish comes after, and is slow here.
      Job.prototype.moveToCompleted = async function (this: Job, ...args: Parameters<Job['moveToCompleted']>) {
        await sleep(300);
        return moveToCompleted.apply(this, args);
      };
      const drain = w.next((f) => f.type === 'drain');
      const stopping = gw.dispatcher.stop(5000);
      await drain;
      const answer = await Promise.race([w.complete(lease), w.closed.then((c) => ({ type: 'closed', ...c }))]);
      assert.equal(answer.type, 'ack', `the worker was answered before the close: ${JSON.stringify(answer)}`);
      await stopping;
      assert.equal((await gw.stores.runs.get(body.run_id))?.status, 'succeeded');
      w.terminate();
    } finally {
      Job.prototype.moveToCompleted = moveToCompleted;
      await gw.stop();
      await cleanupPrefix(prefix);
    }
  });

  it('kill -9 of a worker process mid-job: the run finishes on another worker', async () => {
    const prefix = uniquePrefix('dispatch-kill');
    const gw = await new TestGateway(prefix, FAST).start();
    let child: ChildProcess | undefined;
    try {
      const { key } = await gw.account(100);
      const token = await gw.workerToken();
      child = spawn(process.execPath, ['--import', 'tsx', 'test/helpers/hold-lease-worker.ts', gw.url, token, '1'], { stdio: ['ignore', 'pipe', 'inherit'] });
      const lines = createInterface({ input: child.stdout! })[Symbol.asyncIterator]();
      assert.equal(JSON.parse((await lines.next()).value).type, 'registered');
      const { body } = await gw.submit(key, image());
      assert.equal(JSON.parse((await lines.next()).value).run_id, body.run_id, 'the child holds the lease');
      child.kill('SIGKILL');
      await once(child, 'exit');
      const w = await new RawWorker(gw.url, token).connect();
      const lease = await w.lease();
      assert.equal(lease.run_id, body.run_id);
      await w.complete(lease, ['https://done']);
      const done = (await gw.request('GET', `/v1/jobs/${body.run_id}`, { key })).body;
      assert.equal(done.status, 'succeeded');
      assert.equal(done.attempts, 2);
      assert.equal((await gw.request('GET', '/v1/account', { key })).body.credits, 96);
      w.terminate();
    } finally {
      child?.kill('SIGKILL');
      await gw.stop();
      await cleanupPrefix(prefix);
    }
  });

  it("a gateway that dies loses its workers from the registry and its leases run elsewhere", async () => {
    const prefix = uniquePrefix('dispatch-gwdie');
    const survivor = await new TestGateway(prefix, { ...FAST, LEASE_TTL_MS: '2000' }).start();
    const child = spawn(process.execPath, ['api/bin/switchyard.mjs', 'serve'], {
      env: { ...process.env, PORT: '0', REDIS_PREFIX: prefix, ADMIN_TOKEN, TOOL_SECRET_KEY: TEST_TOOL_SECRET_KEY, LOG_LEVEL: 'info', RATE_LIMIT_PER_SEC: '0', HEARTBEAT_MS: '300', LEASE_TTL_MS: '2000' },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    try {
      let url = '';
      for await (const line of createInterface({ input: child.stdout! })) {
        const entry = JSON.parse(line);
        if (entry.msg === 'gateway listening') {
          url = entry.url;
          break;
        }
      }
      const { key } = await survivor.account(100);
      const token = await survivor.workerToken();
      const doomed = await new RawWorker(url, token).connect();
      const { body } = await survivor.submit(key, image());
      await doomed.lease();
      const count = async () => (await survivor.request('GET', '/v1/capabilities', { key })).body.kinds[0].workers as number;
      assert.equal(await count(), 1);
      child.kill('SIGKILL');
      await once(child, 'exit');
      await until('the dead gateway’s worker to expire', async () => (await count()) === 0);
      assert.equal((await survivor.request('GET', '/v1/network/capacity')).body.workers.total, 0, 'capacity agrees');
      const rescuer = await new RawWorker(survivor.url, token).connect();
      // The lease's lock lapses, the stalled checker requeues the job, and the rescuer gets it.
      const lease = await rescuer.lease(20_000);
      assert.equal(lease.run_id, body.run_id);
      assert.equal(lease.fence, 2);
      await rescuer.complete(lease);
      assert.equal((await survivor.request('GET', `/v1/jobs/${body.run_id}`, { key })).body.status, 'succeeded');
      doomed.terminate();
      rescuer.terminate();
    } finally {
      child.kill('SIGKILL');
      await survivor.stop();
      await cleanupPrefix(prefix);
    }
  });
});
