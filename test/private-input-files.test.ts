import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { decodeJwt } from 'jose';
import { AttestationError, inputDigest } from '../sdk/attestation/index.js';
import { verifyAttestation } from '../sdk/client/index.js';
import { createDemoEngine } from '../sdk/engines/demo/index.js';
import { SwitchyardWorker, silentLogger, type LeaseInfo } from '../sdk/worker/index.js';
import { TestVerifier, privateRawWorker, receiptFor, upload, verifyCli } from './helpers/attestation-fixture.js';
import { TestGateway, cleanupPrefix, uniquePrefix, until } from './helpers/harness.js';
import type { RawWorker } from './helpers/raw-worker.js';
import { dataUri, samplePng } from './helpers/sample-files.js';

const MESH = 'inference:3d:image-to-mesh';
const sha256 = (bytes: Buffer) => createHash('sha256').update(bytes).digest('hex');

async function refusal(p: Promise<unknown>): Promise<AttestationError> {
  const err = await p.then(() => assert.fail('expected the check to fail'), (e: unknown) => e);
  assert.ok(err instanceof AttestationError, String(err));
  return err;
}

describe('private tier: receipts sign the bytes of every input file', function () {
  this.timeout(60_000);
  const prefix = uniquePrefix('private-files');
  const dataDir = mkdtempSync(path.join(tmpdir(), 'sy-private-files-'));
  const photo = samplePng(16, 3);
  const otherPhoto = samplePng(16, 5);
  const photoPath = path.join(dataDir, 'photo.png');
  const otherPath = path.join(dataDir, 'other.png');
  const verifier = new TestVerifier();
  let gw: TestGateway;
  let key: string;
  let token: string;
  const job = async (runId: string) => (await gw.request('GET', `/v1/jobs/${runId}`, { key })).body;
  const submit = async (input: Record<string, unknown>) => {
    const res = await gw.submit(key, { kind: MESH, confidentiality: 'private', input });
    assert.equal(res.status, 202, res.text);
    return res.body.run_id as string;
  };
  const finished = (runId: string) =>
    until(`${runId} to end`, async () => {
      const j = await job(runId);
      return j.terminal && j;
    });

  before(async () => {
    await verifier.init();
    writeFileSync(photoPath, photo);
    writeFileSync(otherPath, otherPhoto);
    gw = await new TestGateway(prefix, { ATTESTATION_JWKS: verifier.jwksFile, DATA_DIR: dataDir, HEARTBEAT_MS: '300', LEASE_TTL_MS: '3000', ATTESTATION_NONCE_TTL_MS: '1000' }).start();
    key = (await gw.account(10_000)).key;
    token = await gw.workerToken('trusted', 'vetted');
  });
  afterEach(async () => {
    for (const q of gw.queues.all()) await q.obliterate({ force: true });
  });
  after(async () => {
    await gw.stop();
    await cleanupPrefix(prefix);
    verifier.cleanup();
    rmSync(dataDir, { recursive: true, force: true });
  });

  describe('an attested SDK worker', () => {
    const input = { image: dataUri('image/png', photo), seed: 4 };
    let worker: SwitchyardWorker;
    let done: any;
    let leased: LeaseInfo;

    before(async () => {
      worker = new SwitchyardWorker({
        gateway: gw.url,
        token,
        kinds: [MESH],
        tier: 'private',
        handler: createDemoEngine({ delayMs: 0 }),
        logger: silentLogger,
        attestation: { evidence: (eatNonce) => verifier.evidence(eatNonce) },
      });
      worker.on('lease', (lease) => (leased = lease));
      await worker.start();
      done = await finished(await submit(input));
    });
    after(() => worker.stop({ timeoutMs: 0 }));

    it('signs the sha256 of the file it was leased, and the input with that hash in the file’s place', async () => {
      assert.equal(done.status, 'succeeded', JSON.stringify(done.error));
      const claims = decodeJwt(done.attestation.receipt);
      assert.deepEqual(claims.input_files, { image: sha256(photo) });
      assert.match(String(leased.input.image), /^file_/, 'the worker is leased the staged file, not the data: URI');
      assert.equal(leased.input_sha256, await inputDigest({ ...leased.input, image: 'ignored' }, { image: sha256(photo) }));
      assert.equal(claims.input_sha256, await inputDigest({ image: `sha256:${sha256(photo)}`, seed: 4 }));
    });

    it('passes the client library check with the input as the caller sent it (a data: URI), as bytes, as a Blob or as a hash', async () => {
      await verifyAttestation(done, { jwks: verifier.jwks, input });
      await verifyAttestation(done, { jwks: verifier.jwks, input: { ...input, image: new Uint8Array(photo) } });
      await verifyAttestation(done, { jwks: verifier.jwks, input: { ...input, image: new Blob([photo]) } });
      await verifyAttestation(done, { jwks: verifier.jwks, input: { ...input, image: 'file_01NOTHASHEDHERE0000000000' }, inputFiles: { image: sha256(photo) } });
    });

    it('fails the client library check for other bytes, and asks for the bytes of a file named by id', async () => {
      const other = await refusal(verifyAttestation(done, { jwks: verifier.jwks, input: { ...input, image: dataUri('image/png', otherPhoto) } }));
      assert.equal(other.code, 'receipt_mismatch');
      assert.match(other.message, /input_files\.image/);
      await assert.rejects(verifyAttestation(done, { jwks: verifier.jwks, input: { ...input, image: 'file_01NOTHASHEDHERE0000000000' } }), /inputFiles\.image/);
      const missing = await refusal(verifyAttestation(done, { jwks: verifier.jwks, input: { seed: 4 } }));
      assert.match(missing.message, /the input does not have: image/);
    });

    it('`switchyard verify --input image=@PATH` checks the file on disk, and fails for another one', async () => {
      const common = [done.run_id, '--jwks', verifier.jwksFile, '--gateway', gw.url, '--key', key, '--input', '{"seed":4}'];
      const ok = await verifyCli([...common, '--input', `image=@${photoPath}`]);
      assert.equal(ok.code, 0, ok.stderr);
      assert.match(ok.stdout, /and so does the input/);
      const bad = await verifyCli([...common, '--input', `image=@${otherPath}`]);
      assert.equal(bad.code, 1);
      assert.match(bad.stderr, /NOT verified: receipt_mismatch.*input_files\.image/);
    });

    it('`switchyard verify` checks a file given by id against the bytes the Files API serves for it', async () => {
      const file = (await gw.request('POST', '/v1/files', { key, headers: { 'content-type': 'image/png' }, raw: photo })).body;
      const byId = await finished(await submit({ image: file.id }));
      assert.equal(byId.status, 'succeeded', JSON.stringify(byId.error));
      const ok = await verifyCli([byId.run_id, '--jwks', verifier.jwksFile, '--gateway', gw.url, '--key', key, '--input', JSON.stringify({ image: file.id })]);
      assert.equal(ok.code, 0, ok.stderr);
    });
  });

  describe('the gateway’s receipt check', () => {
    let raw: RawWorker | undefined;
    after(() => raw?.terminate());

    it('refuses a receipt that omits an input file’s hash, or signs other bytes for it; the run is requeued and succeeds on an honest receipt', async () => {
      const made = await privateRawWorker(gw.url, token, verifier, { register: { kinds: [MESH] } });
      raw = made.worker;
      const runId = await submit({ image: dataUri('image/png', photo) });
      const bads: Array<[Record<string, unknown>, RegExp]> = [
        [{ input_files: undefined }, /does not sign the input file image/],
        [{ input_files: { image: sha256(otherPhoto) } }, /input_files\.image/],
      ];
      let fence = 0;
      for (const [over, why] of bads) {
        const lease = await raw.lease();
        assert.equal(lease.run_id, runId);
        assert.ok(lease.fence > fence);
        fence = lease.fence;
        assert.equal(lease.files.image.sha256, sha256(photo));
        const art = await upload(lease, 'mesh.glb', photo);
        const answer = await raw.report(lease, { type: 'complete', output: { urls: [art.url] }, receipt: await receiptFor(made.keys, lease, raw.workerId, [{ name: 'mesh.glb', sha256: art.sha256 }], over) });
        assert.equal(answer.code, 'receipt_invalid', JSON.stringify(answer));
        assert.match(answer.message, why);
        assert.notEqual((await job(runId)).status, 'succeeded');
      }
      const lease = await raw.lease();
      const art = await upload(lease, 'mesh.glb', photo);
      const ok = await raw.report(lease, { type: 'complete', output: { urls: [art.url] }, receipt: await receiptFor(made.keys, lease, raw.workerId, [{ name: 'mesh.glb', sha256: art.sha256 }]) });
      assert.equal(ok.type, 'ack', JSON.stringify(ok));
      assert.equal((await job(runId)).status, 'succeeded');
    });
  });
});
