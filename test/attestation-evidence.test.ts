import assert from 'node:assert/strict';
import { SignJWT, createLocalJWKSet, exportJWK, generateKeyPair, type JWK } from 'jose';
import {
  AttestationError,
  createTestEvidence,
  eatNonceFor,
  inputDigest,
  sha256Hex,
  signReceipt,
  verifyEvidence,
  verifyReceipt,
  type Evidence,
} from '../sdk/attestation/index.js';

const ISSUER = 'https://nras.attestation.nvidia.com';

async function refusal(p: Promise<unknown>): Promise<string> {
  try {
    await p;
  } catch (err) {
    assert.ok(err instanceof AttestationError, String(err));
    return err.code;
  }
  assert.fail('expected the check to fail');
}

describe('attestation evidence and receipts', function () {
  let verifier: Awaited<ReturnType<typeof generateKeyPair>>;
  let impostor: Awaited<ReturnType<typeof generateKeyPair>>;
  let jwks: { keys: JWK[] };
  let receiptKey: Awaited<ReturnType<typeof generateKeyPair>>;
  let receiptJwk: JWK;
  const nonce = 'gateway-nonce-0123456789abcdef';
  let eatNonce: string;

  before(async () => {
    verifier = await generateKeyPair('ES384', { extractable: true });
    impostor = await generateKeyPair('ES384', { extractable: true });
    jwks = { keys: [{ ...(await exportJWK(verifier.publicKey)), kid: 'nras-1', alg: 'ES384', use: 'sig' }] };
    receiptKey = await generateKeyPair('ES384', { extractable: true });
    receiptJwk = await exportJWK(receiptKey.publicKey);
    eatNonce = await eatNonceFor(nonce, receiptJwk);
  });

  const policy = (over: Record<string, unknown> = {}) => ({ keys: createLocalJWKSet(jwks), issuer: ISSUER, eatNonce, driverVersions: ['550.90.07'], vbiosVersions: ['96.00.9F.00.04'], ...over });
  const evidence = (over: Partial<Parameters<typeof createTestEvidence>[0]> = {}) => createTestEvidence({ key: verifier.privateKey, kid: 'nras-1', issuer: ISSUER, eatNonce, ...over });

  it('accepts evidence that passes every check and reports its expiry and GPUs', async () => {
    const verified = await verifyEvidence(await evidence({ gpus: [{}, { name: 'GPU-1' }] }), policy());
    assert.equal(verified.gpus.length, 2);
    assert.ok(verified.expiresAt.getTime() > Date.now());
  });

  const cases: Array<[string, () => Promise<Evidence>, string, Record<string, unknown>?]> = [
    ['a wrong nonce', () => evidence({ eatNonce: 'another' }), 'wrong_nonce'],
    ['evidence bound to another receipt key', async () => evidence({ eatNonce: await eatNonceFor(nonce, await exportJWK((await generateKeyPair('ES384', { extractable: true })).publicKey)) }), 'wrong_nonce'],
    ['an expired token', () => evidence({ ttlSeconds: -10 }), 'expired'],
    ['dbgstat enabled', () => evidence({ gpus: [{ dbgstat: 'enabled' }] }), 'debug_enabled'],
    ['a measres failure', () => evidence({ gpus: [{ measres: 'fail' }] }), 'measurement_failed'],
    ['secure boot off', () => evidence({ gpus: [{ secboot: false }] }), 'secure_boot_off'],
    ['a failed overall result', () => evidence({ overallResult: false }), 'attestation_failed'],
    ['a driver not on the allow-list', () => evidence({ gpus: [{ driverVersion: '535.0' }] }), 'version_not_allowed'],
    ['a VBIOS not on the allow-list', () => evidence({ gpus: [{ vbiosVersion: '00.00' }] }), 'version_not_allowed'],
    ['another issuer', () => evidence({ issuer: 'https://evil.example' }), 'wrong_issuer'],
    ['an unknown kid', () => evidence({ kid: 'nras-2' }), 'unknown_key'],
    ['a signature by another key under the known kid', () => createTestEvidence({ key: impostor.privateKey, kid: 'nras-1', issuer: ISSUER, eatNonce }), 'bad_signature'],
    [
      'alg none',
      async () => {
        const good = await evidence();
        const [, payload] = good.token.split('.');
        const header = Buffer.from(JSON.stringify({ alg: 'none', kid: 'nras-1' })).toString('base64url');
        return { ...good, token: `${header}.${payload}.` };
      },
      'bad_algorithm',
    ],
    [
      'HS256 (a symmetric key, e.g. the public key used as an HMAC secret)',
      async () => {
        const good = await evidence();
        const token = await new SignJWT({ eat_nonce: eatNonce, 'x-nvidia-overall-att-result': true, submods: {} }).setProtectedHeader({ alg: 'HS256', kid: 'nras-1' }).setIssuer(ISSUER).setExpirationTime('1h').sign(new TextEncoder().encode(JSON.stringify(jwks.keys[0])));
        return { ...good, token };
      },
      'bad_algorithm',
    ],
    [
      'a GPU token swapped for another',
      async () => {
        const good = await evidence();
        const other = await evidence({ gpus: [{ driverVersion: '550.90.07', model: 'other' }] });
        return { token: good.token, gpus: { 'GPU-0': other.gpus['GPU-0'] } };
      },
      'malformed',
    ],
  ];
  for (const [what, make, code] of cases) {
    it(`refuses ${what} (${code})`, async () => {
      assert.equal(await refusal(verifyEvidence(await make(), policy())), code);
    });
  }

  describe('receipts', () => {
    const input = { prompt: 'a secret plan', model: 'x' };
    const artifact = new TextEncoder().encode('artifact bytes');

    async function receipt(over: Record<string, unknown> = {}) {
      return signReceipt(receiptKey.privateKey, {
        run_id: 'run_A',
        worker_id: 'wkr_1',
        kind: 'inference:image:generate',
        input_sha256: await inputDigest(input),
        artifacts: [{ name: 'out.png', sha256: await sha256Hex(artifact) }],
        iat: Math.floor(Date.now() / 1000),
        ...over,
      });
    }
    const expected = async () => ({ run_id: 'run_A', worker_id: 'wkr_1', kind: 'inference:image:generate', input_sha256: await inputDigest({ model: 'x', prompt: 'a secret plan' }), artifact_sha256s: [await sha256Hex(artifact)] });

    it('verifies a receipt over the canonical input (key order does not matter) and the artifacts', async () => {
      const claims = await verifyReceipt(await receipt(), receiptJwk, await expected());
      assert.equal(claims.run_id, 'run_A');
    });

    it('refuses a receipt for another run, from another worker, over another input, or a tampered artifact', async () => {
      assert.equal(await refusal(verifyReceipt(await receipt({ run_id: 'run_B' }), receiptJwk, await expected())), 'receipt_mismatch');
      assert.equal(await refusal(verifyReceipt(await receipt({ worker_id: 'wkr_2' }), receiptJwk, await expected())), 'receipt_mismatch');
      assert.equal(await refusal(verifyReceipt(await receipt({ input_sha256: await inputDigest({ prompt: 'other' }) }), receiptJwk, await expected())), 'receipt_mismatch');
      const tampered = { ...(await expected()), artifact_sha256s: [await sha256Hex(new TextEncoder().encode('artifact bytez'))] };
      assert.equal(await refusal(verifyReceipt(await receipt(), receiptJwk, tampered)), 'artifact_mismatch');
    });

    it('refuses a receipt signed by any key but the attested one', async () => {
      const other = await generateKeyPair('ES384', { extractable: true });
      const forged = await signReceipt(other.privateKey, JSON.parse(Buffer.from((await receipt()).split('.')[1], 'base64url').toString()));
      assert.equal(await refusal(verifyReceipt(forged, receiptJwk, await expected())), 'bad_signature');
    });
  });
});
