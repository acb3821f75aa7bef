import assert from 'node:assert/strict';
import { TestGateway, cleanupPrefix, errorCode, uniquePrefix, until } from './helpers/harness.js';
import { docValidator } from './helpers/openapi-doc.js';
import { RawWorker } from './helpers/raw-worker.js';

const IMAGE = 'inference:image:generate';
const IDENTITY = { protocol: [1, 2, 3, 4, 5], kinds: [IMAGE] };

/**
 * A job's attempts (docs/jobs.md, "Attempts"): `max_attempts` up to JOB_MAX_ATTEMPTS_LIMIT,
 * `retry_on_timeout`, and the attempt history that tells a crash-looping worker (the same
 * opaque worker, worker_lost each time) from workers lost one after another. Real gateway,
 * workers speaking the wire protocol, killed by dropping their connection.
 */
describe('job attempts: max_attempts, retry_on_timeout and the attempt history', function () {
  this.timeout(60_000);
  const prefix = uniquePrefix('job-attempts');
  let gw: TestGateway;
  let key: string;
  let token: string;
  const workers: RawWorker[] = [];

  const job = async (id: string) => (await gw.request('GET', `/v1/jobs/${id}`, { key })).body;
  const balance = async () => (await gw.request('GET', '/v1/account', { key })).body;
  const submit = async (body: Record<string, unknown>) => {
    const res = await gw.submit(key, { kind: IMAGE, input: { prompt: 'a lighthouse' }, ...body });
    assert.equal(res.status, 202, res.text);
    return res.body.run_id as string;
  };
  const worker = async (register: Record<string, unknown> = { kinds: [IMAGE] }) => {
    const w = await new RawWorker(gw.url, token).connect(register);
    workers.push(w);
    return w;
  };
  const ended = (id: string) => until(`${id} ends`, async () => ((await job(id)).terminal ? job(id) : null));
  /** Leases the run to a fresh worker, then kills that worker (its connection dropped, as a crash would). */
  const leaseAndKill = async (runId: string, register?: Record<string, unknown>) => {
    const w = await worker(register);
    const lease = await w.lease();
    assert.equal(lease.run_id, runId);
    w.terminate();
    await w.closed;
    return lease;
  };

  before(async () => {
    // No backoff: a retry goes back at once, whichever worker is there.
    gw = await new TestGateway(prefix, { JOB_MAX_ATTEMPTS_LIMIT: '5', RETRY_BACKOFF_MS: '0' }).start();
    ({ key } = await gw.account(1000));
    token = await gw.workerToken('open');
  });
  // Each test's workers go with it: a retry must not find another test's worker.
  afterEach(async () => {
    for (const w of workers.splice(0)) {
      w.terminate();
      await w.closed;
    }
  });
  after(async () => {
    await gw?.stop();
    await cleanupPrefix(prefix);
  });

  it('max_attempts over JOB_MAX_ATTEMPTS_LIMIT is 400 with the path and the maximum, nothing reserved; the default is JOB_MAX_ATTEMPTS', async () => {
    const before = await balance();
    const over = await gw.submit(key, { kind: IMAGE, input: { prompt: 'x' }, max_attempts: 6 });
    assert.equal(over.status, 400, over.text);
    assert.equal(errorCode(over), 'invalid_request');
    assert.deepEqual([over.body.error.details.path, over.body.error.details.max], ['/max_attempts', 5]);
    assert.equal(errorCode(await gw.submit(key, { kind: IMAGE, input: { prompt: 'x' }, max_attempts: 0 })), 'invalid_request');
    assert.equal(errorCode(await gw.submit(key, { kind: IMAGE, input: { prompt: 'x' }, retry_on_timeout: 'yes' })), 'invalid_request');
    assert.deepEqual(await balance(), before, 'nothing reserved for the refused ones');
    const plain = await job(await submit({}));
    assert.deepEqual([plain.max_attempts, plain.retry_on_timeout, plain.attempt_history], [3, false, []], 'JOB_MAX_ATTEMPTS, no retry on timeout, no attempt yet');
    const doc = (await gw.request('GET', '/v1/openapi.json')).body;
    assert.equal(docValidator(doc)(doc.paths['/v1/jobs/{run_id}'].get.responses['200'].content['application/json'].schema, plain), null);
    await gw.request('POST', `/v1/jobs/${plain.run_id}/cancel`, { key });
    const canceled = await job(plain.run_id);
    assert.deepEqual(canceled.error, { code: 'canceled', message: 'canceled by the caller', retryable: false, attempt: 0 }, 'canceled before any attempt');
  });

  it('max_attempts 1: the worker killed on its attempt fails the run worker_lost, never retried; one entry in the history', async () => {
    const id = await submit({ max_attempts: 1 });
    const lease = await leaseAndKill(id);
    assert.equal(lease.attempt, 1);
    const failed = await ended(id);
    assert.equal(failed.status, 'failed');
    assert.deepEqual([failed.error.code, failed.error.retryable, failed.error.attempt, failed.attempts], ['worker_lost', false, 1, 1]);
    assert.equal(failed.attempt_history.length, 1);
    const [only] = failed.attempt_history;
    assert.deepEqual([only.attempt, only.tier, only.error.code, only.error.attempt], [1, 'open', 'worker_lost', 1]);
    assert.ok(only.started_at && only.ended_at && only.ended_at >= only.started_at);
    assert.match(only.worker, /^wkr_[0-9a-f]{24}$/, 'an opaque id');
    assert.ok(!JSON.stringify(failed).includes(workers[0].workerId), 'never the worker id');
    assert.ok(!JSON.stringify(failed).includes(token), 'never the worker token');
  });

  it('max_attempts 3, a crash-looping worker (one identity, killed at each attempt): three entries of the same opaque worker, each worker_lost', async () => {
    const id = await submit({ max_attempts: 3 });
    for (let n = 1; n <= 3; n++) assert.equal((await leaseAndKill(id, { ...IDENTITY, identity: 'crashing-box' })).attempt, n);
    const failed = await ended(id);
    assert.deepEqual([failed.status, failed.error.code, failed.error.retryable, failed.error.attempt, failed.attempts], ['failed', 'worker_lost', false, 3, 3]);
    const history = failed.attempt_history as Array<{ attempt: number; worker: string; error: { code: string; retryable: boolean } }>;
    assert.deepEqual(history.map((a) => [a.attempt, a.error.code]), [[1, 'worker_lost'], [2, 'worker_lost'], [3, 'worker_lost']]);
    assert.equal(new Set(history.map((a) => a.worker)).size, 1, 'the same worker each time: a crash loop, not a long queue');
    assert.deepEqual(history.map((a) => a.error.retryable), [true, true, false], 'the last one is final');
    // The listing shows the same history.
    const listed = (await gw.request('GET', '/v1/jobs?limit=20', { key })).body.data.find((j: { run_id: string }) => j.run_id === id);
    assert.deepEqual(listed.attempt_history, failed.attempt_history);
  });

  it('max_attempts 3, three workers killed one after another: three distinct opaque workers; a fourth attempt never happens', async () => {
    const id = await submit({ max_attempts: 3 });
    for (let n = 1; n <= 3; n++) assert.equal((await leaseAndKill(id)).attempt, n);
    const failed = await ended(id);
    assert.deepEqual([failed.error.code, failed.attempts], ['worker_lost', 3]);
    assert.equal(new Set(failed.attempt_history.map((a: { worker: string }) => a.worker)).size, 3);
    const idle = await worker();
    const next = await submit({});
    assert.equal((await idle.lease()).run_id, next, 'the failed run is not leased again');
    await idle.complete(idle.leases()[0]);
    const done = await ended(next);
    assert.deepEqual(done.attempt_history.map((a: { attempt: number; error: null }) => [a.attempt, a.error]), [[1, null]], 'a success ends its attempt with no error');
    assert.ok(done.attempt_history[0].ended_at);
  });

  it('a worker that is not lost: a retryable failure is retried, a final one ends the run with the attempt it happened on', async () => {
    const w = await worker();
    const id = await submit({ max_attempts: 2 });
    await w.report(await w.lease(), { type: 'fail', error: { code: 'upstream_unavailable', message: 'the backend is down', retryable: true } });
    await w.report(await w.lease(), { type: 'fail', error: { code: 'bad_input', message: 'no such prompt', retryable: false } });
    const failed = await ended(id);
    assert.deepEqual(failed.error, { code: 'invalid_input', message: 'no such prompt', retryable: false, attempt: 2, reported_code: 'bad_input' }, 'the old name is the list\'s');
    assert.deepEqual(failed.attempt_history.map((a: { error: { code: string } }) => a.error.code), ['upstream_unavailable', 'invalid_input']);
    w.terminate();
  });

  it('timeouts: without retry_on_timeout the first timed-out attempt fails the run; with it, each attempt left is tried', async () => {
    const w = await worker();
    const once = await submit({ timeout_s: 1, max_attempts: 3 });
    await w.lease();
    await w.next((f) => f.type === 'cancel' && f.run_id === once && f.reason === 'timed_out');
    const failed = await ended(once);
    assert.deepEqual([failed.error.code, failed.error.retryable, failed.error.attempt, failed.attempts], ['timed_out', false, 1, 1]);
    assert.deepEqual(failed.attempt_history.map((a: { error: { code: string } }) => a.error.code), ['timed_out']);

    const retried = await submit({ timeout_s: 1, max_attempts: 2, retry_on_timeout: true });
    assert.equal((await job(retried)).retry_on_timeout, true);
    for (let n = 1; n <= 2; n++) {
      const lease = await w.lease();
      assert.deepEqual([lease.run_id, lease.attempt], [retried, n]);
      await w.next((f) => f.type === 'cancel' && f.lease_id === lease.lease_id);
    }
    const out = await ended(retried);
    assert.deepEqual([out.status, out.error.code, out.error.retryable, out.error.attempt, out.attempts], ['failed', 'timed_out', false, 2, 2]);
    assert.deepEqual(out.attempt_history.map((a: { error: { code: string; retryable: boolean } }) => [a.error.code, a.error.retryable]), [['timed_out', true], ['timed_out', false]]);
    w.terminate();
  });
});
