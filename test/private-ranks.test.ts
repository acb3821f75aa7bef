import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { decodeJwt } from 'jose';
import { AttestationError, inputDigest } from '../sdk/attestation/index.js';
import { verifyAttestation, type JobAttestation } from '../sdk/client/index.js';
import { createDemoEngine } from '../sdk/engines/demo/index.js';
import { generateWhole } from '../sdk/engines/demo/ranked-llm.js';
import type { Engine } from '../sdk/engines/types.js';
import { SwitchyardWorker, silentLogger, type LeaseInfo } from '../sdk/worker/index.js';
import { TestVerifier, receiptFor, receiptKeys, verifyCli } from './helpers/attestation-fixture.js';
import { ADMIN_TOKEN, TestGateway, cleanupPrefix, uniquePrefix, until } from './helpers/harness.js';
import { docValidator } from './helpers/openapi-doc.js';
import { RankWorker, type Frame } from './helpers/rank-worker.js';
import { dataUri, samplePng } from './helpers/sample-files.js';

const LLM = 'inference:llm:text-generate';
const MESH = 'inference:3d:image-to-mesh';
const admin = { authorization: `Bearer ${ADMIN_TOKEN}` };
const sha256 = (bytes: Uint8Array) => createHash('sha256').update(bytes).digest('hex');

async function refusal(p: Promise<unknown>): Promise<AttestationError> {
  const err = await p.then(() => assert.fail('expected the check to fail'), (e: unknown) => e);
  assert.ok(err instanceof AttestationError, String(err));
  return err;
}

/**
 * A private job of a ranked model (docs/confidentiality.md, "Ranked private runs"): every rank on
 * an attested private worker, every rank leased the input's hash (only rank 0 the input), and the
 * last rank's receipt naming the worker of each rank, which the gateway checks against the
 * pipeline it formed and the client library against the run's `attestation.ranks`.
 */
describe('private ranked runs: the last rank signs a receipt naming every rank’s worker', function () {
  this.timeout(90_000);
  const prefix = uniquePrefix('private-ranks');
  const dataDir = mkdtempSync(path.join(tmpdir(), 'sy-private-ranks-'));
  const verifier = new TestVerifier();
  let gw: TestGateway;
  let key: string;
  let token: string;
  const sdkWorkers: SwitchyardWorker[] = [];
  const rawWorkers: RankWorker[] = [];
  const job = async (runId: string) => (await gw.request('GET', `/v1/jobs/${runId}`, { key })).body;
  const submit = async (kind: string, input: Record<string, unknown>) => {
    const res = await gw.submit(key, { kind, confidentiality: 'private', input });
    assert.equal(res.status, 202, res.text);
    return res.body.run_id as string;
  };
  const finished = (runId: string) =>
    until(
      `${runId} to end`,
      async () => {
        const j = await job(runId);
        return j.terminal && j;
      },
      45_000,
    );
  const declare = async (kind: string, model: string, ranks: number) => {
    const res = await gw.request('PUT', `/v1/admin/models/${kind}/${model}`, { headers: admin, body: { ranks } });
    assert.ok(res.status < 300, res.text);
  };
  /** An attested SDK worker serving one rank; its leases are kept in `leases`. */
  const sdkRank = async (kind: string, model: string, index: number, count: number, handler: Engine, leases: LeaseInfo[]) => {
    const w = new SwitchyardWorker({
      gateway: gw.url,
      token,
      kinds: [kind],
      tier: 'private',
      handler,
      models: { [kind]: [{ id: model, rank: { index, count } }] },
      logger: silentLogger,
      attestation: { evidence: (eatNonce) => verifier.evidence(eatNonce) },
    });
    w.on('lease', (lease) => leases.push(lease));
    sdkWorkers.push(w);
    await w.start();
    return w;
  };
  /** A private rank worker speaking the protocol by hand; the last rank completes with `receipt(lease, workerId)`. */
  const rawRank = async (model: string, index: number, count: number, receipt?: (lease: Frame, workerId: string) => Promise<string>) => {
    const keys = await receiptKeys();
    const w = new RankWorker(gw.url, token, {
      tier: 'private',
      model,
      index,
      count,
      register: { receipt_key: keys.jwk },
      attest: (nonce) => verifier.answer(nonce, keys.jwk),
      ...(receipt && { receipt: (lease: Frame, workerId: string) => receipt(lease, workerId) }),
    });
    rawWorkers.push(await w.connect());
    return { worker: w, keys };
  };

  before(async () => {
    await verifier.init();
    gw = await new TestGateway(prefix, {
      ATTESTATION_JWKS: verifier.jwksFile,
      DATA_DIR: dataDir,
      HEARTBEAT_MS: '300',
      LEASE_TTL_MS: '3000',
      JOB_MAX_ATTEMPTS: '2',
      ATTESTATION_NONCE_TTL_MS: '1000',
    }).start();
    key = (await gw.account(10_000)).key;
    // Attestation, not the operator's vetting, makes a worker private: an unvetted operator's token.
    token = await gw.workerToken('open', 'unvetted');
  });
  after(async () => {
    await Promise.all(sdkWorkers.map((w) => w.stop({ timeoutMs: 0 })));
    for (const w of rawWorkers) w.close();
    await gw.stop();
    await cleanupPrefix(prefix);
    verifier.cleanup();
    rmSync(dataDir, { recursive: true, force: true });
  });

  describe('three attested SDK workers serve demo-ranked-llm, one rank each', () => {
    const input = { prompt: 'hello world', model: 'demo-ranked-llm', max_tokens: 12 };
    const leases: LeaseInfo[][] = [[], [], []];
    const ranks: SwitchyardWorker[] = [];
    let done: any;
    let ids: string[];

    before(async () => {
      await declare(LLM, 'demo-ranked-llm', 3);
      for (let index = 0; index < 3; index++) ranks.push(await sdkRank(LLM, 'demo-ranked-llm', index, 3, createDemoEngine({ delayMs: 0 }), leases[index]));
      ids = ranks.map((w) => w.workerId!);
      done = await finished(await submit(LLM, input));
    });

    it('succeeds with the text of the model run whole; its attestation names the three workers by rank, the last of them the signer', async () => {
      assert.equal(done.status, 'succeeded', JSON.stringify(done.error));
      assert.equal(done.output.text, generateWhole(input.prompt, input.max_tokens).text);
      const att = done.attestation as Required<JobAttestation>;
      assert.equal(att.worker_id, ids[2], 'the last rank signed');
      assert.deepEqual(
        att.ranks,
        ids.map((id, rank) => ({ rank, worker_id: id, evidence_url: `${gw.url}/v1/attestation/workers/${id}` })),
      );
      const claims = decodeJwt(att.receipt);
      assert.deepEqual(claims.ranks, ids);
      assert.equal(claims.input_sha256, await inputDigest(input));
      assert.equal(claims.input_files, undefined);
      // Each rank's evidence is at its URL while its worker is connected.
      for (const r of att.ranks) {
        const res = await gw.request('GET', new URL(r.evidence_url!).pathname, { key });
        assert.equal(res.status, 200, res.text);
        assert.equal(res.body.worker_id, r.worker_id);
      }
    });

    it('leased every rank the input’s hash, and only rank 0 the input', async () => {
      const digest = await inputDigest(input);
      assert.deepEqual(leases.map((l) => l.length), [1, 1, 1]);
      assert.deepEqual(leases.map(([l]) => [l.tier, l.input_sha256, l.rank?.workers]), [0, 1, 2].map(() => ['private', digest, ids]));
      assert.equal(leases[0][0].input.prompt, input.prompt);
      assert.deepEqual([leases[1][0].input, leases[2][0].input], [{}, {}]);
    });

    it('matches the job’s published schema', async () => {
      const doc = (await gw.request('GET', '/v1/openapi.json')).body;
      const schema = doc.paths['/v1/jobs/{run_id}'].get.responses['200'].content['application/json'].schema;
      const check = docValidator(doc);
      assert.equal(check(schema, done), null);
      // The schema says what ranks are: a list of {rank, worker_id, evidence_url}.
      assert.notEqual(check(schema, { ...done, attestation: { ...done.attestation, ranks: [{ rank: 0 }] } }), null);
    });

    it('passes the client library check with the input, and switchyard verify names the ranks', async () => {
      const verified = await verifyAttestation(done, { jwks: verifier.jwks, input });
      assert.deepEqual(verified.receipt.ranks, ids);
      const res = await verifyCli([done.run_id, '--jwks', verifier.jwksFile, '--input', JSON.stringify(input), '--gateway', gw.url, '--key', key]);
      assert.equal(res.code, 0, res.stderr);
      assert.match(res.stdout, new RegExp(`ran in 3 ranks on workers ${ids.join(', ')}; its last rank, attested worker ${ids[2]} `));
    });

    it('refuses an attestation whose ranks differ from what the last rank signed, or whose last rank is not the signer', async () => {
      const att = done.attestation as Required<JobAttestation>;
      const withRanks = (ranks: unknown) => ({ ...done, attestation: { ...att, ranks } });
      const swapped = [{ ...att.ranks[0], worker_id: ids[1] }, { ...att.ranks[1], worker_id: ids[0] }, att.ranks[2]];
      assert.match((await refusal(verifyAttestation(withRanks(swapped), { jwks: verifier.jwks }))).message, /ranks/);
      assert.equal((await refusal(verifyAttestation(withRanks(swapped), { jwks: verifier.jwks }))).code, 'receipt_mismatch');
      const otherLast = [att.ranks[0], att.ranks[1], { ...att.ranks[2], worker_id: 'wkr_someone_else' }];
      assert.equal((await refusal(verifyAttestation(withRanks(otherLast), { jwks: verifier.jwks }))).code, 'receipt_mismatch');
      const fewer = [att.ranks[0], att.ranks[2]].map((r, rank) => ({ ...r, rank }));
      assert.equal((await refusal(verifyAttestation(withRanks(fewer), { jwks: verifier.jwks }))).code, 'receipt_mismatch');
      // Left out, the attestation reads as a whole run's, whose receipt names no ranks.
      const { ranks: _, ...whole } = att;
      assert.equal((await refusal(verifyAttestation({ ...done, attestation: whole }, { jwks: verifier.jwks }))).code, 'receipt_mismatch');
      const misnumbered = att.ranks.map((r) => ({ ...r, rank: r.rank + 1 }));
      assert.equal((await refusal(verifyAttestation(withRanks(misnumbered), { jwks: verifier.jwks }))).code, 'malformed');
    });
  });

  it('a ranked private job with an input file: rank 0 alone gets its bytes, every rank its hash, and the last rank signs it', async () => {
    const photo = samplePng(16, 3);
    const input = { image: dataUri('image/png', photo), seed: 4 };
    const mesh = Buffer.from('glTF stand-in made from the first rank’s frame');
    const leases: LeaseInfo[][] = [[], []];
    const fetched: string[] = [];
    const stage: Engine = async (_kind, _input, ctx) => {
      const rank = ctx.rank!;
      if (rank.first) {
        const file = await ctx.inputFile('image');
        fetched.push(sha256(await readFile(file.path)));
        await rank.send(Buffer.from(file.sha256));
        await rank.end();
        for await (const _ of rank.frames);
        return { artifacts: [] };
      }
      const frames: Uint8Array[] = [];
      for await (const f of rank.frames) frames.push(f);
      return { artifacts: [{ name: 'mesh.glb', contentType: 'model/gltf-binary', data: Buffer.concat([mesh, ...frames]) }] };
    };
    await declare(MESH, 'sealed-mesh', 2);
    const w0 = await sdkRank(MESH, 'sealed-mesh', 0, 2, stage, leases[0]);
    const w1 = await sdkRank(MESH, 'sealed-mesh', 1, 2, stage, leases[1]);
    const done = await finished(await submit(MESH, { ...input, model: 'sealed-mesh' }));
    assert.equal(done.status, 'succeeded', JSON.stringify(done.error));
    assert.deepEqual(fetched, [sha256(photo)]);
    assert.ok(leases[0][0].files?.image, 'rank 0 is leased the file');
    assert.equal(leases[1][0].files, undefined, 'the last rank is not');
    assert.deepEqual([leases[0][0].input_files, leases[1][0].input_files], [{ image: sha256(photo) }, { image: sha256(photo) }]);
    const claims = decodeJwt(done.attestation.receipt);
    assert.deepEqual(claims.input_files, { image: sha256(photo) });
    assert.deepEqual(claims.ranks, [w0.workerId, w1.workerId]);
    const verified = await verifyAttestation(done, { jwks: verifier.jwks, input: { ...input, model: 'sealed-mesh' } });
    assert.equal(verified.artifacts.length, 1);
  });

  describe('raw rank workers: what the gateway refuses and what it does not ask for', () => {
    const input = { prompt: 'in cat', max_tokens: 6 };

    it('acknowledges a rank before the last that completes without a receipt, and refuses a last rank’s receipt naming other ranks (receipt_invalid)', async () => {
      await declare(LLM, 'sealed-swapped', 3);
      const r0 = await rawRank('sealed-swapped', 0, 3);
      const r1 = await rawRank('sealed-swapped', 1, 3);
      // The last rank signs the pipeline's workers with ranks 0 and 1 swapped.
      const r2 = await rawRank('sealed-swapped', 2, 3, (lease, workerId) => {
        const [a, b, c] = lease.rank.workers as string[];
        return receiptFor(r2.keys, lease, workerId, [], { ranks: [b, a, c] });
      });
      const runId = await submit(LLM, { ...input, model: 'sealed-swapped' });
      const done = await finished(runId);
      assert.deepEqual([done.status, done.error?.code, done.attempts], ['failed', 'receipt_invalid', 2], JSON.stringify(done.error));
      assert.match(done.error.message, /receipt_mismatch.*ranks/);
      assert.equal(done.attestation, null);
      const answers = (w: RankWorker) => w.json.filter((f) => f.of === 'complete');
      // The last rank was told why, at each attempt.
      await until('the last rank’s second refusal', async () => answers(r2.worker).length === 2);
      assert.deepEqual(answers(r2.worker).map((f) => f.code), ['receipt_invalid', 'receipt_invalid']);
      // Rank 0 completed with {urls: []} and no receipt long before the last rank (it ends the
      // generation): acknowledged at both attempts. Rank 1 is never refused for want of a receipt
      // either (its complete may only come late enough to find the pipeline ended).
      await until('rank 0’s two completes answered', async () => answers(r0.worker).length === 2);
      assert.deepEqual(answers(r0.worker).map((f) => f.type), ['ack', 'ack'], JSON.stringify(answers(r0.worker)));
      assert.ok(answers(r1.worker).every((f) => f.type === 'ack' || f.code === 'stale_lease'), JSON.stringify(answers(r1.worker)));
      for (const { worker } of [r0, r1, r2]) assert.ok(worker.leases().every((l) => l.tier === 'private' && typeof l.input_sha256 === 'string'));
    });

    it('refuses a last rank’s receipt that names no ranks', async () => {
      await declare(LLM, 'sealed-unnamed', 2);
      await rawRank('sealed-unnamed', 0, 2);
      const last = await rawRank('sealed-unnamed', 1, 2, (lease, workerId) => receiptFor(last.keys, lease, workerId, []));
      const done = await finished(await submit(LLM, { ...input, model: 'sealed-unnamed' }));
      assert.deepEqual([done.status, done.error?.code], ['failed', 'receipt_invalid']);
      assert.match(done.error.message, /ranks is missing/);
    });

    it('accepts an honest raw last rank: the receipt names the lease’s rank.workers', async () => {
      await declare(LLM, 'sealed-honest', 2);
      const first = await rawRank('sealed-honest', 0, 2);
      const last = await rawRank('sealed-honest', 1, 2, (lease, workerId) => receiptFor(last.keys, lease, workerId, [], { ranks: lease.rank.workers }));
      const done = await finished(await submit(LLM, { ...input, model: 'sealed-honest' }));
      assert.equal(done.status, 'succeeded', JSON.stringify(done.error));
      assert.deepEqual(
        done.attestation.ranks.map((r: { worker_id: string }) => r.worker_id),
        [first.worker.workerId, last.worker.workerId],
      );
      await verifyAttestation(done, { jwks: verifier.jwks, input: { ...input, model: 'sealed-honest' } });
    });
  });
});
