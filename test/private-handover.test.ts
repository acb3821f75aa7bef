import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { verifyAttestation } from '../sdk/client/index.js';
import { SwitchyardWorker, silentLogger } from '../sdk/worker/index.js';
import { TestVerifier, privateRawWorker, receiptFor, upload } from './helpers/attestation-fixture.js';
import { TestGateway, cleanupPrefix, uniquePrefix, until } from './helpers/harness.js';
import type { RawWorker } from './helpers/raw-worker.js';
import { TcpProxy } from './helpers/tcp-proxy.js';

const IMAGE = 'inference:image:generate';
const privateJob = { kind: IMAGE, confidentiality: 'private', input: { prompt: 'a sealed letter' } };

/**
 * Private leases moving between two instances on one Redis (protocol 2): the instance a
 * worker comes back to must see it attest afresh before it takes a private lease back.
 */
describe('private leases handed over between gateway instances', function () {
  this.timeout(60_000);
  const verifier = new TestVerifier();
  let prefix: string;
  let dataDir: string;
  let lb: TcpProxy;
  let a: TestGateway;
  let b: TestGateway;
  let key: string;
  let token: string;
  const sockets: RawWorker[] = [];
  const job = async (runId: string) => (await b.request('GET', `/v1/jobs/${runId}`, { key })).body;
  const port = (gw: TestGateway) => Number(new URL(gw.url).port);
  let aStopped: Promise<void> | undefined;
  const stopA = () => (aStopped ??= a.stop());

  before(() => verifier.init());
  after(() => verifier.cleanup());
  beforeEach(async () => {
    prefix = uniquePrefix('private-handover');
    aStopped = undefined;
    dataDir = mkdtempSync(path.join(tmpdir(), 'sy-private-handover-'));
    lb = await new TcpProxy().listen();
    const env = { HEARTBEAT_MS: '300', LEASE_TTL_MS: '4000', DATA_DIR: dataDir, PUBLIC_URL: lb.url, ATTESTATION_JWKS: verifier.jwksFile };
    a = await new TestGateway(prefix, env).start();
    b = await new TestGateway(prefix, env).start();
    lb.targets = [port(a)];
    key = (await a.account(100)).key;
    token = (await a.workerToken('trusted', 'vetted'));
  });
  afterEach(async () => {
    for (const w of sockets.splice(0)) w.terminate();
    await stopA();
    await b.stop();
    await lb.close();
    await cleanupPrefix(prefix);
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('a resumed private lease is taken back only by a connection whose evidence checks out, and completes there', async () => {
    const first = await privateRawWorker(a.url, token, verifier, { register: { protocol: [1, 2], kinds: [IMAGE] } });
    sockets.push(first.worker);
    const runId = (await a.submit(key, privateJob)).body.run_id;
    const lease = await first.worker.lease();
    const told = first.worker.next((f) => f.type === 'reconnect');
    const stopped = stopA();
    await told;
    first.worker.close();
    await stopped;
    lb.targets = [port(b)];

    const resume = { protocol: [1, 2], kinds: [IMAGE], resume: [{ lease_id: lease.lease_id, fence: lease.fence, upload_token: lease.upload_token }] };
    // Same receipt key, but evidence from a debug-enabled GPU: no registration, so no resume.
    const refused = await privateRawWorker(b.url, token, verifier, { keys: first.keys, register: resume, answer: (nonce, jwk) => verifier.answer(nonce, jwk, { gpus: [{ dbgstat: 'enabled' }] }) }).catch((e: { frame: { code: string }; worker: RawWorker }) => e);
    assert.ok('frame' in refused, 'refused');
    sockets.push(refused.worker);
    assert.equal(refused.frame.code, 'attestation_failed');
    assert.equal(refused.worker.frames.some((f) => f.type === 'registered'), false);

    const second = await privateRawWorker(b.url, token, verifier, { keys: first.keys, register: resume });
    sockets.push(second.worker);
    assert.deepEqual(second.worker.frames.find((f) => f.type === 'registered')!.resumed, [lease.lease_id]);
    const art = await upload(lease, 'out.png', Buffer.from('png bytes'));
    const receipt = await receiptFor(second.keys, lease, second.worker.workerId, [{ name: 'out.png', sha256: art.sha256 }]);
    assert.equal((await second.worker.report(lease, { type: 'complete', output: { urls: [art.url] }, receipt })).type, 'ack');
    const done = await job(runId);
    assert.deepEqual([done.status, done.attempts, done.attestation.worker_id], ['succeeded', 1, second.worker.workerId]);
  });

  it('an SDK worker that finished a private run while moving signs its receipt again under its new worker id', async () => {
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    const worker = new SwitchyardWorker({
      gateway: lb.url,
      token,
      kinds: [IMAGE],
      tier: 'private',
      logger: silentLogger,
      attestation: { evidence: (eatNonce) => verifier.evidence(eatNonce) },
      handler: async () => {
        await held;
        return { artifacts: [] };
      },
    });
    try {
      await worker.start();
      const onA = worker.workerId;
      const runId = (await a.submit(key, privateJob)).body.run_id;
      await until('the handler to start', async () => worker.running === 1);
      // A stops while the balancer still points at it: the worker cannot reach any instance yet.
      const stopped = stopA();
      await until('the worker to leave A with its lease', async () => !worker.connected && worker.activeLeases === 1);
      release();
      await until('the run to be reported (and held: there is no instance to send it to)', async () => worker.running === 0);
      lb.targets = [port(b)];
      await stopped;
      const done = await until('the run to succeed on B', async () => {
        const j = await job(runId);
        return j.status === 'succeeded' && j;
      }, 20_000);
      assert.notEqual(worker.workerId, onA);
      assert.deepEqual([done.attempts, done.attestation.worker_id], [1, worker.workerId]);
      const verified = await verifyAttestation(done, { jwks: verifier.jwks, input: privateJob.input });
      assert.equal(verified.receipt.worker_id, worker.workerId);
    } finally {
      await worker.stop({ timeoutMs: 0 });
    }
  });
});
