import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { AttestationError, inputDigest } from '../sdk/attestation/index.js';
import { verifyAttestation } from '../sdk/client/index.js';
import { createDemoEngine } from '../sdk/engines/demo/index.js';
import { SwitchyardWorker, silentLogger, type LeaseInfo } from '../sdk/worker/index.js';
import { flipArtifactBytes } from './helpers/artifact-files.js';
import { TestVerifier, privateRawWorker, verifyCli } from './helpers/attestation-fixture.js';
import { ADMIN_TOKEN, TestGateway, cleanupPrefix, sleep, uniquePrefix, until } from './helpers/harness.js';
import { RawWorker } from './helpers/raw-worker.js';

const IMAGE = 'inference:image:generate';
const admin = { authorization: `Bearer ${ADMIN_TOKEN}` };

async function refusal(p: Promise<unknown>): Promise<string> {
  const err = await p.then(() => assert.fail('expected the check to fail'), (e: unknown) => e);
  assert.ok(err instanceof AttestationError, String(err));
  return err.code;
}

describe('private tier: attested workers, receipts, verification and routing', function () {
  this.timeout(60_000);
  const prefix = uniquePrefix('private');
  const dataDir = mkdtempSync(path.join(tmpdir(), 'sy-private-'));
  const verifier = new TestVerifier();
  let gw: TestGateway;
  let key: string;
  let trustedToken: string;
  let openToken: string;
  const cleanup: Array<() => unknown> = [];
  const job = async (runId: string) => (await gw.request('GET', `/v1/jobs/${runId}`, { key })).body;
  const submit = async (tier: string, input: Record<string, unknown> = { prompt: 'a sealed letter' }) => (await gw.submit(key, { kind: IMAGE, confidentiality: tier, input })).body.run_id as string;
  const token = async (trust: 'open' | 'trusted') => (await gw.request('POST', '/v1/admin/operators', { body: { name: `op-${trust}`, trust }, headers: admin })).body.worker_token as string;

  before(async () => {
    await verifier.init();
    gw = await new TestGateway(prefix, {
      ATTESTATION_JWKS: verifier.jwksFile,
      DATA_DIR: dataDir,
      // The filesystem store, whatever the run's storage: a test modifies an artifact's file in it.
      STORAGE: 'fs',
      HEARTBEAT_MS: '300',
      LEASE_TTL_MS: '3000',
      ATTESTATION_NONCE_TTL_MS: '1000',
      ATTESTATION_REFRESH_BEFORE_MS: '1000',
    }).start();
    key = (await gw.account(10_000)).key;
    trustedToken = await token('trusted');
    openToken = await token('open');
  });
  afterEach(async () => {
    for (const fn of cleanup.splice(0)) await fn();
    for (const q of gw.queues.all()) await q.obliterate({ force: true });
  });
  after(async () => {
    await gw.stop();
    await cleanupPrefix(prefix);
    verifier.cleanup();
    rmSync(dataDir, { recursive: true, force: true });
  });

  describe('a private job on an attested SDK worker', () => {
    const input = { prompt: 'the quarterly numbers', seed: 7 };
    let worker: SwitchyardWorker;
    let done: any;
    let leased: LeaseInfo;
    /** The artifact records the gateway read while the run went on. */
    const reads: string[] = [];

    before(async () => {
      const store = gw.services.artifacts;
      const realGet = store.get;
      store.get = (id) => (reads.push(id), realGet.call(store, id));
      cleanup.push(() => (store.get = realGet));
      worker = new SwitchyardWorker({
        gateway: gw.url,
        token: trustedToken,
        kinds: [IMAGE],
        tier: 'private',
        handler: createDemoEngine({ delayMs: 0 }),
        logger: silentLogger,
        attestation: { evidence: (eatNonce) => verifier.evidence(eatNonce) },
      });
      worker.on('lease', (lease) => (leased = lease));
      await worker.start();
      const runId = await submit('private', input);
      done = await until('the private run to succeed', async () => {
        const j = await job(runId);
        return j.terminal && j;
      });
    });
    after(() => worker.stop({ timeoutMs: 0 }));

    it('succeeds and carries its attestation: evidence, receipt key, receipt and evidence URL', async () => {
      assert.equal(done.status, 'succeeded', JSON.stringify(done.error));
      const att = done.attestation;
      assert.equal(att.tier, 'private');
      assert.equal(att.worker_id, worker.workerId);
      assert.deepEqual(Object.keys(att.receipt_key).sort(), ['crv', 'kty', 'x', 'y'], 'the public key only');
      assert.equal(typeof att.receipt, 'string');
      assert.equal(typeof att.evidence.token, 'string');
      assert.equal(att.evidence_url, `${gw.url}/v1/attestation/workers/${worker.workerId}`);
      assert.ok(Date.parse(att.verified_at) > 0);
      assert.equal(leased.input_sha256, await inputDigest(input), 'the lease names the hash of the stored input');
    });

    it('describes its files from the records the receipt check read, without reading them again', async () => {
      const ids = (done.output.urls as string[]).map((u) => new URL(u).pathname.split('/')[3]);
      assert.deepEqual(reads, ids, 'one read per URL, by the receipt check');
      const metas = await Promise.all(ids.map((id) => gw.services.artifacts.get(id)));
      assert.deepEqual(
        done.output.files,
        metas.map((m, i) => ({ url: done.output.urls[i], name: m!.name, content_type: m!.content_type, size: m!.size, sha256: m!.sha256 })),
      );
    });

    it('passes the client library check, given the verifier keys and the input', async () => {
      const verified = await verifyAttestation(done, { jwks: verifier.jwks, input });
      assert.equal(verified.receipt.run_id, done.run_id);
      assert.equal(verified.artifacts.length, done.output.urls.length);
    });

    it('passes `switchyard verify` (the real bin, in a child process), which exits 0', async () => {
      const res = await verifyCli([done.run_id, '--jwks', verifier.jwksFile, '--input', JSON.stringify(input), '--gateway', gw.url, '--key', key]);
      assert.equal(res.code, 0, res.stderr);
      assert.match(res.stdout, /^verified: /);
    });

    it('serves the worker’s current evidence at its evidence_url, for audits', async () => {
      const res = await gw.request('GET', new URL(done.attestation.evidence_url).pathname, { key });
      assert.equal(res.status, 200, res.text);
      assert.equal(res.body.worker_id, worker.workerId);
      assert.deepEqual(res.body.receipt_key, done.attestation.receipt_key);
      assert.ok(Date.parse(res.body.expires_at) > Date.now());
      assert.equal(res.body.gpus.length, 1);
      assert.equal((await gw.request('GET', new URL(done.attestation.evidence_url).pathname)).status, 401, 'an account key is required');
      assert.equal((await gw.request('GET', '/v1/attestation/workers/wkr_01NOSUCHWORKER', { key })).status, 404);
    });

    it('fails verification with another verifier’s keys, in the library and the CLI', async () => {
      const other = await new TestVerifier().init();
      cleanup.push(() => other.cleanup());
      assert.equal(await refusal(verifyAttestation(done, { jwks: other.jwks, input })), 'bad_signature');
      const res = await verifyCli([done.run_id, '--jwks', other.jwksFile, '--gateway', gw.url, '--key', key]);
      assert.equal(res.code, 1);
      assert.match(res.stderr, /NOT verified/);
    });

    it('fails verification once a stored artifact is modified', async () => {
      const id = new URL(done.output.urls[0]).pathname.split('/')[3];
      // Same length, other bytes: the download looks whole, only its hash tells.
      flipArtifactBytes(path.join(dataDir, 'artifacts', id.slice(0, 2), `${id}.art`));
      assert.equal(await refusal(verifyAttestation(done, { jwks: verifier.jwks, input })), 'artifact_mismatch');
      const res = await verifyCli([done.run_id, '--jwks', verifier.jwksFile, '--gateway', gw.url, '--key', key]);
      assert.equal(res.code, 1);
      assert.match(res.stderr, /artifact_mismatch/);
    });
  });

  describe('routing', () => {
    const raw = async (tokenOf: string, register: Record<string, unknown> = {}) => {
      const w = await new RawWorker(gw.url, tokenOf).connect({ slots: 4, ...register });
      cleanup.push(() => w.terminate());
      return w;
    };
    const attested = async (tokenOf: string, opts: Parameters<typeof privateRawWorker>[3] = {}) => {
      const { worker } = await privateRawWorker(gw.url, tokenOf, verifier, { ...opts, register: { slots: 4, ...opts.register } });
      cleanup.push(() => worker.terminate());
      return worker;
    };

    it('a private run never reaches an open or trusted worker; it waits for an attested one', async () => {
      const open = await raw(openToken);
      const trusted = await raw(trustedToken, { tier: 'trusted' });
      const runId = await submit('private');
      await sleep(500);
      assert.deepEqual([open.leases().length, trusted.leases().length], [0, 0]);
      assert.equal((await job(runId)).status, 'queued');
      const w = await attested(trustedToken);
      assert.equal((await w.lease()).run_id, runId);
    });

    it('a private worker serves the lower tiers its token allows: a trusted run never reaches an open token’s, even attested', async () => {
      const openPrivate = await attested(openToken);
      const trustedRun = await submit('trusted');
      const openRun = await submit('open');
      assert.equal((await openPrivate.lease()).run_id, openRun);
      await sleep(300);
      assert.deepEqual(openPrivate.leases().map((l) => l.run_id), [openRun]);
      const trustedPrivate = await attested(trustedToken);
      assert.equal((await trustedPrivate.lease()).run_id, trustedRun);
    });

    it('a late answer to a replaced nonce is ignored and does not spend the current one', async () => {
      const nonces: string[] = [];
      let jwkSeen: any;
      const w = await attested(trustedToken, {
        answer: async (nonce, jwk) => {
          nonces.push(nonce);
          jwkSeen = jwk;
          return nonces.length === 1 ? verifier.answer(nonce, jwk, { ttlSeconds: 3 }) : null;
        },
      });
      await until('a refresh nonce', async () => nonces.length >= 2);
      const [first, current] = nonces;
      w.send({ type: 'attestation', nonce: first, evidence: await verifier.answer(first, jwkSeen) });
      const refused = await w.next((f) => f.type === 'error' && /older nonce/.test(f.message));
      assert.match(refused.message, /older nonce/);
      w.send({ type: 'attestation', nonce: current, evidence: await verifier.answer(current, jwkSeen) });
      const renewed = await w.next((f) => f.type === 'attested');
      assert.ok(Date.parse(renewed.expires_at) > Date.now());
    });

    it('an attested worker whose evidence lapses gets no private lease but keeps its open work, and gets private work again once it attests afresh', async () => {
      let answering = true;
      // Evidence good for two seconds; the gateway asks for fresh evidence before then, and is ignored.
      const w = await attested(trustedToken, { answer: async (nonce, jwk) => (answering ? verifier.answer(nonce, jwk, { ttlSeconds: 2 }) : null) });
      answering = false;
      const expiresAt = Date.parse(w.frames.find((f) => f.type === 'registered')!.attestation.expires_at);
      await until('a refresh nonce', async () => w.frames.filter((f) => f.type === 'attest').length >= 2);
      await until('the evidence to lapse', async () => Date.now() > expiresAt + 100);
      const imageTiers = async () => (await gw.request('GET', '/v1/capabilities', { key })).body.kinds.find((k: any) => k.kind === IMAGE).workers_by_tier;
      assert.deepEqual(await imageTiers(), { open: 0, trusted: 1, private: 0 }, 'a lapsed private worker counts under its token trust');
      const privateRun = await submit('private');
      const openRun = await submit('open');
      assert.equal((await w.lease()).run_id, openRun, 'still serves open work');
      await sleep(500);
      assert.deepEqual(w.leases().map((l) => l.run_id), [openRun], 'no private lease without valid evidence');
      answering = true;
      const renewed = await w.next((f) => f.type === 'attested', 10_000);
      assert.ok(Date.parse(renewed.expires_at) > Date.now());
      assert.equal((await w.lease()).run_id, privateRun);
      assert.deepEqual(await imageTiers(), { open: 0, trusted: 0, private: 1 }, 'counted as private again once it re-attests');
    });
  });
});
