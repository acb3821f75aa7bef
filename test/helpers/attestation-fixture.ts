import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { exportJWK, generateKeyPair, type CryptoKey, type JWK } from 'jose';
import { createTestEvidence, eatNonceFor, signReceipt, type Evidence, type ReceiptClaims, type TestEvidenceOptions } from '../../sdk/attestation/index.js';
import { RawWorker, type Frame } from './raw-worker.js';

export const NRAS_ISSUER = 'https://nras.attestation.nvidia.com';

type EvidenceOverrides = Partial<Omit<TestEvidenceOptions, 'key'>>;

/**
 * A local attestation verifier: an ES384 key whose public half is a JWKS file the gateway
 * trusts (ATTESTATION_JWKS), signing evidence in NRAS's shape. Real keys, real signatures.
 */
export class TestVerifier {
  kid = 'test-verifier-1';
  jwks!: { keys: JWK[] };
  jwksFile!: string;
  private key!: CryptoKey;
  private dir = '';

  async init(kid = this.kid): Promise<this> {
    this.kid = kid;
    const pair = await generateKeyPair('ES384', { extractable: true });
    this.key = pair.privateKey;
    this.jwks = { keys: [{ ...(await exportJWK(pair.publicKey)), kid, alg: 'ES384', use: 'sig' }] };
    this.dir = mkdtempSync(path.join(tmpdir(), 'sy-verifier-'));
    this.jwksFile = path.join(this.dir, 'jwks.json');
    writeFileSync(this.jwksFile, JSON.stringify(this.jwks));
    return this;
  }

  /** Evidence for an `eat_nonce` (what an SDK worker's `attestation.evidence` is given). */
  evidence(eatNonce: string, over: EvidenceOverrides = {}): Promise<Evidence> {
    return createTestEvidence({ key: this.key, kid: this.kid, issuer: NRAS_ISSUER, eatNonce, ...over });
  }

  /** Evidence answering a gateway nonce for a receipt key (what a worker sends in `attestation`). */
  async answer(nonce: string, receiptKey: JWK, over: EvidenceOverrides = {}): Promise<Evidence> {
    return this.evidence(await eatNonceFor(nonce, receiptKey), over);
  }

  cleanup(): void {
    if (this.dir) rmSync(this.dir, { recursive: true, force: true });
  }
}

/** A worker's receipt key pair and its public JWK. */
export async function receiptKeys(): Promise<{ privateKey: CryptoKey; jwk: JWK }> {
  const pair = await generateKeyPair('ES384');
  return { privateKey: pair.privateKey, jwk: await exportJWK(pair.publicKey) };
}

/**
 * A private worker speaking the protocol by hand. `answer(nonce)` gives the evidence for each
 * `attest` nonce (default: valid evidence from `verifier`; null: stay silent).
 */
export async function privateRawWorker(
  gatewayUrl: string,
  token: string,
  verifier: TestVerifier,
  opts: { keys?: Awaited<ReturnType<typeof receiptKeys>>; answer?: (nonce: string, jwk: JWK) => Promise<unknown>; register?: Record<string, unknown> } = {},
): Promise<{ worker: RawWorker; keys: Awaited<ReturnType<typeof receiptKeys>> }> {
  const keys = opts.keys ?? (await receiptKeys());
  const answer = opts.answer ?? ((nonce: string, jwk: JWK) => verifier.answer(nonce, jwk));
  const worker = new RawWorker(gatewayUrl, token, { attest: (nonce) => answer(nonce, keys.jwk) });
  // A refusal carries the socket, to look at how it closed.
  await worker.connect({ tier: 'private', receipt_key: keys.jwk, ...opts.register }).catch((err: Error) => {
    throw Object.assign(err, { worker });
  });
  return { worker, keys };
}

/** Uploads `bytes` under the lease, as a worker does before `complete`. */
export async function upload(lease: Frame, name: string, bytes: Buffer): Promise<{ url: string; sha256: string }> {
  const res = await fetch(`${lease.upload_url}?name=${encodeURIComponent(name)}`, { method: 'POST', headers: { authorization: `Bearer ${lease.upload_token}` }, body: bytes });
  if (res.status !== 201) throw new Error(`upload refused: ${res.status} ${await res.text()}`);
  return (await res.json()) as { url: string; sha256: string };
}

/** A receipt for a lease as an honest worker signs it; `over` changes any claim. */
export function receiptFor(keys: { privateKey: CryptoKey }, lease: Frame, workerId: string, artifacts: ReceiptClaims['artifacts'], over: Partial<ReceiptClaims> = {}): Promise<string> {
  return signReceipt(keys.privateKey, {
    run_id: lease.run_id,
    worker_id: workerId,
    kind: lease.kind,
    input_sha256: lease.input_sha256,
    ...(lease.files && { input_files: Object.fromEntries(Object.entries(lease.files as Record<string, { sha256: string }>).map(([field, f]) => [field, f.sha256])) }),
    artifacts,
    iat: Math.floor(Date.now() / 1000),
    ...over,
  });
}

const execFileAsync = promisify(execFile);

/** `switchyard verify` as a user runs it: the real bin, in a child process. */
export async function verifyCli(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await execFileAsync(process.execPath, ['api/bin/switchyard.mjs', 'verify', ...args]);
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}
