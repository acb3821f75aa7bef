import assert from 'node:assert/strict';
import { RawWorker } from './helpers/raw-worker.js';
import { TestGateway, cleanupPrefix, uniquePrefix, until } from './helpers/harness.js';

const KIND = 'inference:image:generate';
const V5 = { protocol: [1, 2, 3, 4, 5], kinds: [KIND] };
const retryable = { code: 'upstream_failed', message: 'out of memory', retryable: true };

/**
 * Where a retry goes after a worker's retryable failure (docs/architecture.md, "Retries"), and
 * how a worker whose backend is down is left out (protocol 5 `backend`): the attempts of a run
 * are not spent in milliseconds on one broken worker.
 */
describe('retries and workers whose backend is down', function () {
  this.timeout(30_000);
  const prefix = uniquePrefix('lease-retry');
  let gw: TestGateway;
  let key: string;
  let token: string;
  const workers: RawWorker[] = [];
  const connect = async (register: Record<string, unknown> = V5) => {
    const w = await new RawWorker(gw.url, token).connect(register);
    workers.push(w);
    return w;
  };
  const job = async (runId: string) => (await gw.request('GET', `/v1/jobs/${runId}`, { key })).body;
  const leasesOf = (w: RawWorker, runId: string) => w.frames.filter((f) => f.type === 'lease' && f.run_id === runId);

  before(async () => {
    gw = await new TestGateway(prefix, { RETRY_BACKOFF_MS: '400', JOB_MAX_ATTEMPTS: '3' }).start();
    ({ key } = await gw.account(1000));
    token = await gw.workerToken();
  });
  afterEach(async () => {
    for (const w of workers.splice(0)) w.ws.terminate();
    await until('the workers gone', async () => gw.dispatcher.localWorkers().length === 0);
  });
  after(async () => {
    await gw.stop();
    await cleanupPrefix(prefix);
  });

  it("a retry goes to another worker first, though the failing worker's slot is free first", async () => {
    const first = await connect();
    const { body } = await gw.submit(key);
    const lease = await first.lease();
    const second = await connect();
    const answer = first.next((f) => f.type === 'ack' || f.type === 'error');
    first.send({ type: 'fail', lease_id: lease.lease_id, fence: lease.fence, error: retryable });
    assert.equal((await answer).type, 'ack');
    const retry = await second.lease();
    assert.equal(retry.run_id, body.run_id);
    assert.equal(retry.attempt, 2);
    assert.equal(leasesOf(first, body.run_id).length, 1, 'the failing worker did not take its own retry');
    second.send({ type: 'complete', lease_id: retry.lease_id, fence: retry.fence, output: { urls: [] } });
    await until('the run succeeds', async () => (await job(body.run_id)).status === 'succeeded');
  });

  it('with no other worker, the retry waits out a backoff (retry_backoff), then the same worker gets it', async () => {
    const only = await connect();
    const { body } = await gw.submit(key);
    const lease = await only.lease();
    const answer = only.next((f) => f.type === 'ack' || f.type === 'error');
    only.send({ type: 'fail', lease_id: lease.lease_id, fence: lease.fence, error: retryable });
    assert.equal((await answer).type, 'ack');
    // Seen as soon as the failure is acknowledged: queued, not in the wait list yet, and why.
    const waiting = await job(body.run_id);
    assert.equal(waiting.status, 'queued');
    assert.equal(waiting.attempts, 1);
    assert.equal(waiting.queue_position, null);
    assert.equal(waiting.waiting_reason, 'retry_backoff');
    assert.equal(leasesOf(only, body.run_id).length, 1);
    const retry = await only.lease();
    assert.equal(retry.attempt, 2);
    only.send({ type: 'complete', lease_id: retry.lease_id, fence: retry.fence, output: { urls: [] } });
    await until('the run succeeds', async () => (await job(body.run_id)).status === 'succeeded');
  });

  it('a worker reporting its backend down is counted but offered nothing; back up, it is filled', async () => {
    const w = await connect();
    w.send({ type: 'backend', available: false, message: 'ComfyUI at :8188 refused the connection' });
    const image = async () => ((await gw.request('GET', '/v1/capabilities', { key })).body.kinds as Array<{ kind: string; workers: number; workers_unavailable: number }>).find((k) => k.kind === KIND)!;
    await until('the worker counted as unavailable', async () => (await image()).workers_unavailable === 1);
    assert.equal((await image()).workers, 1);
    const capacity = (await gw.request('GET', '/v1/network/capacity')).body;
    assert.deepEqual(capacity.slots, { total: 1, busy: 0, free: 0, unavailable: 1 });
    assert.equal(capacity.workers.unavailable, 1);
    const metrics = await (await fetch(`${gw.url}/metrics`)).text();
    assert.match(metrics, /^switchyard_worker_slots\{tier="open",state="unavailable"\} 1$/m);
    assert.match(metrics, /^switchyard_worker_slots\{tier="open",state="free"\} 0$/m);

    const { body } = await gw.submit(key);
    assert.equal((await job(body.run_id)).waiting_reason, 'backend_unavailable');
    w.send({ type: 'backend', available: true });
    const lease = await w.lease();
    assert.equal(lease.run_id, body.run_id);
    assert.equal(lease.attempt, 1);
    assert.equal((await image()).workers_unavailable, 0);
    w.send({ type: 'complete', lease_id: lease.lease_id, fence: lease.fence, output: { urls: [] } });
    await until('the run succeeds', async () => (await job(body.run_id)).status === 'succeeded');
  });

  it('a backend failure on the last worker: the retry waits for it to answer again, attempts unspent', async () => {
    const w = await connect();
    const { body } = await gw.submit(key);
    const lease = await w.lease();
    // The SDK's order: the backend frame first, then the lease's failure.
    w.send({ type: 'backend', available: false, message: 'connection refused' });
    w.send({ type: 'fail', lease_id: lease.lease_id, fence: lease.fence, error: { code: 'upstream_unavailable', message: 'connection refused', retryable: true } });
    await until('the run back in its queue', async () => (await job(body.run_id)).status === 'queued');
    // Past any backoff: with its only worker down, the run is never leased.
    await until('the backoff over', async () => (await job(body.run_id)).waiting_reason === 'backend_unavailable', 10_000);
    assert.equal(leasesOf(w, body.run_id).length, 1);
    assert.equal((await job(body.run_id)).attempts, 1);
    w.send({ type: 'backend', available: true });
    const retry = await w.lease();
    assert.equal(retry.attempt, 2);
    w.send({ type: 'complete', lease_id: retry.lease_id, fence: retry.fence, output: { urls: [] } });
    await until('the run succeeds', async () => (await job(body.run_id)).status === 'succeeded');
  });

  it('the backend frame needs protocol 5', async () => {
    const old = await connect({ protocol: [1, 2, 3, 4], kinds: [KIND] });
    const refusal = old.next((f) => f.type === 'error');
    old.send({ type: 'backend', available: false });
    const frame = await refusal;
    assert.equal(frame.code, 'bad_frame');
    assert.match(frame.message, /protocol 5/);
  });
});
