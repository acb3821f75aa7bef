import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { SignJWT, type JWK } from 'jose';
import { sha256Hex, signReceipt, type Evidence } from '../sdk/attestation/index.js';
import { SwitchyardWorker, WorkerRefusedError, silentLogger } from '../sdk/worker/index.js';
import { flipArtifactBytes } from './helpers/artifact-files.js';
import { TestVerifier, privateRawWorker, receiptFor, receiptKeys, upload } from './helpers/attestation-fixture.js';
import { TestGateway, cleanupPrefix, uniquePrefix, until } from './helpers/harness.js';
import { RawWorker, type Frame } from './helpers/raw-worker.js';

const IMAGE = 'inference:image:generate';
const PNG = Buffer.from('89504e470d0a1a0a0000000d49484452', 'hex');

/** Evidence whose overall token is re-signed with another algorithm, or none at all. */
async function withAlgorithm(good: Evidence, alg: 'none' | 'HS256', jwks: { keys: JWK[] }): Promise<Evidence> {
  const [, payload] = good.token.split('.');
  if (alg === 'none') return { ...good, token: `${Buffer.from(JSON.stringify({ alg: 'none', kid: 'test-verifier-1' })).toString('base64url')}.${payload}.` };
  const claims = JSON.parse(Buffer.from(payload, 'base64url').toString()) as Record<string, unknown>;
  // The classic confusion: the verifier's public key used as an HMAC secret.
  const token = await new SignJWT(claims).setProtectedHeader({ alg: 'HS256', kid: 'test-verifier-1' }).sign(new TextEncoder().encode(JSON.stringify(jwks.keys[0])));
  return { ...good, token };
}

describe('private tier refusals at the gateway', function () {
  this.timeout(60_000);
  const prefix = uniquePrefix('private-refusals');
  const dataDir = mkdtempSync(path.join(tmpdir(), 'sy-private-refusals-'));
  const verifier = new TestVerifier();
  const impostor = new TestVerifier();
  let gw: TestGateway;
  let key: string;
  let token: string;
  const sockets: RawWorker[] = [];
  const job = async (runId: string) => (await gw.request('GET', `/v1/jobs/${runId}`, { key })).body;
  const submit = async (input: Record<string, unknown> = { prompt: 'a sealed letter' }) => (await gw.submit(key, { kind: IMAGE, confidentiality: 'private', input })).body.run_id as string;

  before(async () => {
    await verifier.init();
    await impostor.init('another-verifier');
    // The filesystem store, whatever the run's storage: a receipt test changes an artifact's bytes in it.
    gw = await new TestGateway(prefix, { ATTESTATION_JWKS: verifier.jwksFile, DATA_DIR: dataDir, HEARTBEAT_MS: '300', LEASE_TTL_MS: '3000', JOB_MAX_ATTEMPTS: '2', ATTESTATION_NONCE_TTL_MS: '1000', STORAGE: 'fs' }).start();
    key = (await gw.account(10_000)).key;
    token = (await gw.workerToken('trusted', 'vetted'));
  });
  afterEach(async () => {
    for (const w of sockets.splice(0)) w.terminate();
    for (const q of gw.queues.all()) await q.obliterate({ force: true });
  });
  after(async () => {
    await gw.stop();
    await cleanupPrefix(prefix);
    verifier.cleanup();
    impostor.cleanup();
    rmSync(dataDir, { recursive: true, force: true });
  });

  const attested = async (opts: Parameters<typeof privateRawWorker>[3] = {}) => {
    const made = await privateRawWorker(gw.url, token, verifier, opts);
    sockets.push(made.worker);
    return made;
  };

  /** Registers with `answer`, expecting a refusal; the error frame and the socket. */
  async function refusedWith(answer: (nonce: string, jwk: JWK) => Promise<unknown>, keys?: Awaited<ReturnType<typeof receiptKeys>>): Promise<{ frame: Frame; worker: RawWorker }> {
    const err = await attested({ answer, keys }).then(
      () => assert.fail('registered'),
      (e: { frame?: Frame; worker: RawWorker }) => e,
    );
    sockets.push(err.worker);
    assert.equal(err.worker.frames.filter((f) => f.type === 'registered').length, 0);
    return { frame: err.frame!, worker: err.worker };
  }

  /** Expects the refusal of failed evidence: error `attestation_failed` (its check in `reason`), then close 4403. */
  async function refused(answer: (nonce: string, jwk: JWK) => Promise<unknown>, keys?: Awaited<ReturnType<typeof receiptKeys>>): Promise<Frame> {
    const { frame, worker } = await refusedWith(answer, keys);
    assert.equal(frame.code, 'attestation_failed', JSON.stringify(frame));
    assert.equal((await worker.closed).code, 4403);
    return frame;
  }

  describe('registration', () => {
    const cases: Array<[string, (nonce: string, jwk: JWK) => Promise<Evidence>, string]> = [
      ['evidence for another nonce', (_n, jwk) => verifier.answer('not-the-gateway-nonce', jwk), 'wrong_nonce'],
      ['evidence bound to another receipt key', async (n) => verifier.answer(n, (await receiptKeys()).jwk), 'wrong_nonce'],
      ['expired evidence', (n, jwk) => verifier.answer(n, jwk, { ttlSeconds: -10 }), 'expired'],
      ['a GPU with debugging enabled (dbgstat)', (n, jwk) => verifier.answer(n, jwk, { gpus: [{ dbgstat: 'enabled' }] }), 'debug_enabled'],
      ['failed measurements (measres)', (n, jwk) => verifier.answer(n, jwk, { gpus: [{ measres: 'fail' }] }), 'measurement_failed'],
      ['alg none', async (n, jwk) => withAlgorithm(await verifier.answer(n, jwk), 'none', verifier.jwks), 'bad_algorithm'],
      ['HS256 keyed with the public key', async (n, jwk) => withAlgorithm(await verifier.answer(n, jwk), 'HS256', verifier.jwks), 'bad_algorithm'],
      ['a key the verifier JWKS does not have (unknown kid)', (n, jwk) => impostor.answer(n, jwk), 'unknown_key'],
    ];
    for (const [what, answer, reason] of cases) {
      it(`refuses ${what}: attestation_failed (${reason}), close 4403`, async () => {
        assert.equal((await refused(answer)).reason, reason);
      });
    }

    it('refuses a nonce issued to another connection, and evidence replayed from another registration', async () => {
      const first = await attested();
      const firstEvidence = await verifier.answer(first.worker.frames.find((f) => f.type === 'attest')!.nonce, first.keys.jwk);
      // Evidence that made `first` register, replayed by a second connection with the same receipt key.
      assert.equal((await refused(async () => firstEvidence, first.keys)).reason, 'wrong_nonce');
      // A nonce still outstanding on another connection does not answer this one's.
      let pendingNonce = '';
      const waiting = new RawWorker(gw.url, token, { attest: async (n) => void (pendingNonce = n) });
      sockets.push(waiting);
      const waitingKeys = await receiptKeys();
      void waiting.connect({ tier: 'private', receipt_key: waitingKeys.jwk }).catch(() => {});
      await waiting.next((f) => f.type === 'attest');
      assert.equal((await refused(() => verifier.answer(pendingNonce, waitingKeys.jwk), waitingKeys)).reason, 'wrong_nonce');
    });

    it('refuses evidence sent twice for one nonce, without ending a registered worker', async () => {
      const { worker, keys } = await attested();
      const replay = await verifier.answer(worker.frames.find((f) => f.type === 'attest')!.nonce, keys.jwk);
      const answer = worker.next((f) => f.type === 'error');
      worker.send({ type: 'attestation', evidence: replay });
      assert.deepEqual([(await answer).code, (await answer).reason], ['attestation_failed', 'wrong_nonce']);
      worker.send({ type: 'heartbeat' });
      const runId = await submit();
      assert.equal((await worker.lease()).run_id, runId, 'still registered, still attested');
    });

    it('refuses a register without a receipt key, or with its private half (bad_frame, 4400)', async () => {
      const { jwk } = await receiptKeys();
      for (const receipt_key of [undefined, { ...jwk, d: 'secret' }, { kty: 'EC', crv: 'P-256', x: 'a', y: 'b' }]) {
        const w = new RawWorker(gw.url, token);
        sockets.push(w);
        const err = (await w.connect({ tier: 'private', receipt_key }).catch((e) => e)) as { frame?: Frame };
        assert.equal(err.frame?.code, 'bad_frame', JSON.stringify(receipt_key));
        assert.equal((await w.closed).code, 4400);
      }
    });

    it('closes a registration whose nonce goes unanswered (attestation_timeout, 4408: retry later)', async () => {
      const { frame, worker } = await refusedWith(async () => null);
      assert.equal(frame.code, 'attestation_timeout');
      assert.equal((await worker.closed).code, 4408);
    });

    it('an SDK worker whose evidence is refused stops with WorkerRefusedError', async () => {
      const w = new SwitchyardWorker({
        gateway: gw.url,
        token,
        kinds: [IMAGE],
        tier: 'private',
        handler: async () => ({ artifacts: [] }),
        logger: silentLogger,
        attestation: { evidence: (n) => verifier.evidence(n, { gpus: [{ dbgstat: 'enabled' }] }) },
      });
      const err = await w.start().then(() => assert.fail('started'), (e: unknown) => e);
      assert.ok(err instanceof WorkerRefusedError);
      assert.equal(err.code, 'attestation_failed');
      assert.match(err.message, /debug/);
      assert.throws(() => new SwitchyardWorker({ gateway: gw.url, token, kinds: [IMAGE], tier: 'private', handler: async () => ({ artifacts: [] }) }), /attestation/);
    });
  });

  describe('receipts', () => {
    type Bad = (c: { lease: Frame; worker: RawWorker; keys: Awaited<ReturnType<typeof receiptKeys>>; other: { worker: RawWorker; keys: Awaited<ReturnType<typeof receiptKeys>> } }) => Promise<{ urls: string[]; receipt?: string }>;
    const good = async (lease: Frame, name = 'out.png', bytes = PNG) => {
      const art = await upload(lease, name, bytes);
      return { url: art.url, artifacts: [{ name, sha256: art.sha256 }] };
    };
    const cases: Array<[string, Bad, RegExp]> = [
      ['no receipt', async ({ lease }) => ({ urls: [(await good(lease)).url] }), /malformed/],
      ['a receipt signed by another worker', async ({ lease, other }) => {
        const { url, artifacts } = await good(lease);
        return { urls: [url], receipt: await receiptFor(other.keys, lease, other.worker.workerId, artifacts) };
      }, /bad_signature/],
      ['a receipt naming another worker', async ({ lease, keys, other }) => {
        const { url, artifacts } = await good(lease);
        return { urls: [url], receipt: await receiptFor(keys, lease, other.worker.workerId, artifacts) };
      }, /receipt_mismatch.*worker_id/],
      ['a receipt for another run', async ({ lease, worker, keys }) => {
        const { url, artifacts } = await good(lease);
        return { urls: [url], receipt: await receiptFor(keys, lease, worker.workerId, artifacts, { run_id: 'run_01OTHERRUN0000000000000000' }) };
      }, /receipt_mismatch.*run_id/],
      ['a receipt over another input', async ({ lease, worker, keys }) => {
        const { url, artifacts } = await good(lease);
        return { urls: [url], receipt: await receiptFor(keys, lease, worker.workerId, artifacts, { input_sha256: await sha256Hex('{"prompt":"something else"}') }) };
      }, /receipt_mismatch.*input_sha256/],
      ['an uploaded artifact claimed with another hash', async ({ lease, worker, keys }) => {
        const { url } = await good(lease);
        return { urls: [url], receipt: await receiptFor(keys, lease, worker.workerId, [{ name: 'out.png', sha256: await sha256Hex('other bytes') }]) };
      }, /artifact_mismatch/],
      ['an artifact whose stored bytes changed after the upload', async ({ lease, worker, keys }) => {
        const { url, artifacts } = await good(lease);
        const id = new URL(url).pathname.split('/')[3];
        flipArtifactBytes(path.join(dataDir, 'artifacts', id.slice(0, 2), `${id}.art`));
        return { urls: [url], receipt: await receiptFor(keys, lease, worker.workerId, artifacts) };
      }, /artifact_mismatch.*changed/],
      ['a URL that is not an upload of this lease', async ({ lease, worker, keys }) => {
        const { artifacts } = await good(lease);
        return { urls: ['https://cdn.example/out.png'], receipt: await receiptFor(keys, lease, worker.workerId, artifacts) };
      }, /artifact_mismatch/],
      ['a receipt of a whole lease that names pipeline ranks', async ({ lease, worker, keys, other }) => {
        const { url, artifacts } = await good(lease);
        return { urls: [url], receipt: await receiptFor(keys, lease, worker.workerId, artifacts, { ranks: [other.worker.workerId, worker.workerId] }) };
      }, /receipt_mismatch.*not leased as a pipeline/],
      ['a receipt whose payload is JSON null', async ({ lease, keys }) => {
        const { url } = await good(lease);
        return { urls: [url], receipt: await signReceipt(keys.privateKey, null as never) };
      }, /malformed/],
      ['a receipt whose artifacts list holds null', async ({ lease, worker, keys }) => {
        const { url } = await good(lease);
        return { urls: [url], receipt: await receiptFor(keys, lease, worker.workerId, [null as never]) };
      }, /malformed/],
    ];

    for (const [what, bad, why] of cases) {
      it(`refuses ${what}: receipt_invalid, the run is requeued, and succeeds on its next attempt with a valid receipt`, async () => {
        const a = await attested();
        const other = await attested();
        other.worker.close(); // only its key and id are used
        const runId = await submit();
        const lease = await a.worker.lease();
        const { urls, receipt } = await bad({ lease, worker: a.worker, keys: a.keys, other });
        const answer = await a.worker.report(lease, { type: 'complete', output: { urls }, ...(receipt ? { receipt } : {}) });
        assert.equal(answer.code, 'receipt_invalid', JSON.stringify(answer));
        assert.match(answer.message, why);
        assert.notEqual((await job(runId)).status, 'succeeded');
        const retry = await a.worker.lease();
        assert.deepEqual([retry.run_id, retry.fence], [runId, lease.fence + 1]);
        const ok = await good(retry);
        const done = await a.worker.report(retry, { type: 'complete', output: { urls: [ok.url] }, receipt: await receiptFor(a.keys, retry, a.worker.workerId, ok.artifacts) });
        assert.equal(done.type, 'ack', JSON.stringify(done));
        const finished = await job(runId);
        assert.deepEqual([finished.status, finished.attempts, finished.attestation.worker_id], ['succeeded', 2, a.worker.workerId]);
      });
    }

    it('refuses a receipt signed after the worker’s evidence lapsed', async () => {
      let answers = 0;
      // Five-second evidence (time for the lease to come first on a loaded machine: the cluster
      // pass once timed out at two), and silence when the gateway asks for fresh evidence.
      const { worker, keys } = await attested({ answer: async (nonce, jwk) => (answers++ === 0 ? verifier.answer(nonce, jwk, { ttlSeconds: 5 }) : null) });
      const expiresAt = Date.parse(worker.frames.find((f) => f.type === 'registered')!.attestation.expires_at);
      const runId = await submit();
      const lease = await worker.lease();
      const ok = await good(lease);
      await until('the evidence to lapse', async () => Date.now() > expiresAt + 1000);
      const answer = await worker.report(lease, { type: 'complete', output: { urls: [ok.url] }, receipt: await receiptFor(keys, lease, worker.workerId, ok.artifacts) });
      assert.equal(answer.code, 'receipt_invalid');
      assert.match(answer.message, /expired/);
      assert.notEqual((await job(runId)).status, 'succeeded');
    });

    it('refuses a receipt it cannot check (artifact store read error): receipt_invalid, the run is requeued, not left running', async () => {
      const { worker, keys } = await attested();
      const runId = await submit();
      const lease = await worker.lease();
      const ok = await good(lease);
      const store = gw.services.artifacts!;
      const open = store.open;
      store.open = async () => {
        store.open = open;
        throw new Error('simulated storage failure');
      };
      try {
        const answer = await worker.report(lease, { type: 'complete', output: { urls: [ok.url] }, receipt: await receiptFor(keys, lease, worker.workerId, ok.artifacts) });
        assert.equal(answer.code, 'receipt_invalid', JSON.stringify(answer));
        assert.doesNotMatch(answer.message, /simulated/, 'the cause is logged, not told');
      } finally {
        store.open = open;
      }
      const retry = await worker.lease();
      assert.deepEqual([retry.run_id, retry.fence], [runId, lease.fence + 1]);
    });

    it('fails the run with receipt_invalid after its last attempt', async () => {
      const { worker } = await attested();
      const runId = await submit();
      for (let attempt = 1; attempt <= 2; attempt++) {
        const lease = await worker.lease();
        const { url } = await good(lease);
        assert.equal((await worker.report(lease, { type: 'complete', output: { urls: [url] } })).code, 'receipt_invalid');
      }
      const failed = await job(runId);
      assert.deepEqual([failed.status, failed.error.code, failed.attestation], ['failed', 'receipt_invalid', null]);
    });
  });
});
