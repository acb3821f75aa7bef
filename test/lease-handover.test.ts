import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { TestGateway, cleanupPrefix, uniquePrefix, until } from './helpers/harness.js';
import { RawWorker, type Frame } from './helpers/raw-worker.js';

const image = { kind: 'inference:image:generate', input: { prompt: 'a lighthouse' } };
const V2 = { protocol: [1, 2] };

const claim = (lease: Frame, over: Record<string, unknown> = {}) => ({ lease_id: lease.lease_id, fence: lease.fence, upload_token: lease.upload_token, ...over });

/**
 * Two instances on one Redis: A holds a worker's lease and is stopped; the worker comes back
 * on B. These tests speak the protocol by hand to see each frame of the handover.
 */
describe('lease handover between gateway instances (worker protocol 2)', function () {
  this.timeout(60_000);
  let prefix: string;
  let dataDir: string;
  let a: TestGateway;
  let b: TestGateway;
  let key: string;
  let token: string;
  const sockets: RawWorker[] = [];
  const connect = async (gw: TestGateway, register: Record<string, unknown> = {}, tokenOf = token) => {
    const w = await new RawWorker(gw.url, tokenOf).connect({ ...V2, kinds: ['inference:image:generate'], ...register });
    sockets.push(w);
    return w;
  };
  const job = async (runId: string) => (await b.request('GET', `/v1/jobs/${runId}`, { key })).body;
  let aStopped: Promise<void> | undefined;
  const stopAOnce = () => (aStopped ??= a.stop());
  /** Stops A with `w` on it; resolves with the stop (A finishes it once `w` has left). */
  const stopA = async (w: RawWorker) => {
    const told = w.next((f) => f.type === 'reconnect');
    const stopped = stopAOnce();
    await told;
    w.close();
    return stopped;
  };

  beforeEach(async () => {
    prefix = uniquePrefix('handover');
    aStopped = undefined;
    dataDir = mkdtempSync(path.join(tmpdir(), 'sy-handover-'));
    const env = { HEARTBEAT_MS: '300', LEASE_TTL_MS: '3000', DATA_DIR: dataDir };
    a = await new TestGateway(prefix, env).start();
    b = await new TestGateway(prefix, env).start();
    key = (await a.account(100)).key;
    token = await a.workerToken();
  });
  afterEach(async () => {
    for (const w of sockets.splice(0)) w.terminate();
    await stopAOnce();
    await b.stop();
    await cleanupPrefix(prefix);
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('a worker told to reconnect takes its running lease to another instance: uploads and the final report work there, and the run ran once', async () => {
    const w1 = await connect(a);
    const run = (await a.submit(key, image)).body.run_id;
    const lease = await w1.lease();
    assert.equal((await w1.report(lease, { type: 'progress', progress: 0.4 })).type, 'ack');
    const stopped = await stopA(w1);

    const w2 = await connect(b, { resume: [claim(lease)] });
    const registered = w2.frames.find((f) => f.type === 'registered')!;
    assert.equal(registered.protocol, 2);
    assert.deepEqual([registered.resumed, registered.lost], [[lease.lease_id], []]);
    await stopped;
    // The same upload token works on B; the lease keeps its id and fence.
    const uploaded = await fetch(`${b.url}/v1/leases/${lease.lease_id}/artifacts?name=out.png`, { method: 'POST', headers: { authorization: `Bearer ${lease.upload_token}`, 'content-type': 'image/png' }, body: Buffer.from('png bytes') });
    assert.equal(uploaded.status, 201);
    const { url } = (await uploaded.json()) as { url: string };
    assert.equal((await w2.report(lease, { type: 'progress', progress: 0.8 })).type, 'ack');
    assert.equal((await w2.complete(lease, [url])).type, 'ack');
    const done = await job(run);
    assert.deepEqual([done.status, done.attempts, done.output.urls], ['succeeded', 1, [url]]);
    assert.deepEqual(w2.leases().map((l) => l.run_id), [], 'B leased nothing new in the adopted slot');
    assert.deepEqual((await b.request('GET', '/v1/account', { key })).body.credits, 96, 'charged once');
  });

  it('claims are checked: a wrong upload token, a wrong fence or another owner are refused, and the lease is requeued once its lock lapses', async () => {
    const w1 = await connect(a);
    const run = (await a.submit(key, image)).body.run_id;
    const lease = await w1.lease();
    const stopped = await stopA(w1);
    await stopped;

    const stranger = await connect(b, { resume: [claim(lease)] }, await b.workerToken('open', 'someone else'));
    assert.deepEqual(stranger.frames.find((f) => f.type === 'registered')!.lost, [lease.lease_id], 'another owner');
    stranger.close();
    const forger = await connect(b, { resume: [claim(lease, { upload_token: 'not-the-token' }), claim(lease, { fence: lease.fence + 1 })] });
    const answer = forger.frames.find((f) => f.type === 'registered')!;
    assert.deepEqual([answer.resumed, answer.lost], [[], [lease.lease_id, lease.lease_id]]);
    // Nobody adopted it: its lock lapses and the stalled checker requeues it; the next lease has the next fence.
    const next = await forger.lease(20_000);
    assert.deepEqual([next.run_id, next.fence], [run, lease.fence + 1]);
    assert.equal((await forger.complete(next)).type, 'ack');
    assert.equal((await job(run)).attempts, 2);
  });

  it('a cancel requested while the lease is between instances reaches the worker on the new one', async () => {
    const w1 = await connect(a);
    const run = (await a.submit(key, image)).body.run_id;
    const lease = await w1.lease();
    await stopA(w1);
    assert.equal((await b.request('POST', `/v1/jobs/${run}/cancel`, { key })).status, 200);
    const w2 = await connect(b, { resume: [claim(lease)] });
    const cancel = await until('the cancel frame', async () => w2.frames.find((f) => f.type === 'cancel'));
    assert.equal(cancel.lease_id, lease.lease_id);
    await w2.report(lease, { type: 'fail', error: { code: 'canceled', message: 'stopped', retryable: false } });
    assert.equal((await job(run)).status, 'canceled');
  });

  it('a protocol 1 worker is told to drain instead, and what it holds at the end goes back to the queue', async () => {
    const old = await connect(a, { protocol: [1] });
    const run = (await a.submit(key, image)).body.run_id;
    await old.lease();
    const drain = old.next((f) => f.type === 'drain');
    await stopAOnce();
    await drain;
    const w2 = await connect(b);
    const next = await w2.lease();
    assert.deepEqual([next.run_id, next.fence], [run, 2]);
  });
});
