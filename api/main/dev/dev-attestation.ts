import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { exportJWK, generateKeyPair, importJWK, type JWK } from 'jose';
import { createTestEvidence, type Evidence } from '../../../sdk/attestation/index.js';

/**
 * TEST evidence for development: attestation tokens in NRAS's shape signed by a local
 * "verifier" key instead of NVIDIA's attestation service. They let the private flow run end to
 * end on any machine and prove nothing about its hardware (docs/confidentiality.md).
 */

/** The issuer of the dev verifier `npm run dev` makes: never NVIDIA's, so nobody mistakes its tokens. */
export const DEV_VERIFIER_ISSUER = 'urn:switchyard:dev-test-verifier';

/** A local verifier's private key file: an ES384 private JWK with `kid` and, optionally, `iss`. */
export interface VerifierKeyFile extends JWK {
  kid: string;
  iss?: string;
}

/** Reads and checks an `--attestation-key` file; throws with what is wrong. */
export function readVerifierKey(file: string): VerifierKeyFile {
  let jwk: VerifierKeyFile;
  try {
    jwk = JSON.parse(readFileSync(file, 'utf8')) as VerifierKeyFile;
  } catch (err) {
    throw new Error(`cannot read the attestation key ${file}: ${(err as Error).message}`);
  }
  if (!jwk || jwk.kty !== 'EC' || jwk.crv !== 'P-384' || typeof jwk.d !== 'string') throw new Error(`${file} is not an ES384 private JWK (kty EC, crv P-384, with d)`);
  if (typeof jwk.kid !== 'string' || jwk.kid === '') throw new Error(`${file} has no kid: the gateway's ATTESTATION_JWKS finds the key by it`);
  return jwk;
}

/** An evidence source for the worker SDK that signs TEST evidence with the verifier key. */
export async function testEvidenceSource(jwk: VerifierKeyFile, issuer: string, ttlSeconds = 3600): Promise<(eatNonce: string) => Promise<Evidence>> {
  const key = await importJWK(jwk, 'ES384');
  return (eatNonce) => createTestEvidence({ key: key as Parameters<typeof createTestEvidence>[0]['key'], kid: jwk.kid, issuer, eatNonce, ttlSeconds });
}

/**
 * The dev verifier under DATA_DIR, made once: its private key (for the dev private worker, and
 * for `switchyard worker --attestation-key`) and the JWKS the dev gateway trusts.
 */
export async function devVerifier(dataDir: string): Promise<{ keyFile: string; jwksFile: string }> {
  const keyFile = path.resolve(dataDir, 'dev-attestation-key.json');
  const jwksFile = path.resolve(dataDir, 'dev-attestation-jwks.json');
  if (!existsSync(keyFile) || !existsSync(jwksFile)) {
    const { privateKey, publicKey } = await generateKeyPair('ES384', { extractable: true });
    const kid = `dev-${Date.now().toString(36)}`;
    mkdirSync(path.dirname(keyFile), { recursive: true });
    writeFileSync(keyFile, JSON.stringify({ ...(await exportJWK(privateKey)), kid, alg: 'ES384', iss: DEV_VERIFIER_ISSUER }, null, 2), { mode: 0o600 });
    writeFileSync(jwksFile, JSON.stringify({ keys: [{ ...(await exportJWK(publicKey)), kid, alg: 'ES384', use: 'sig' }] }, null, 2));
  }
  return { keyFile, jwksFile };
}
