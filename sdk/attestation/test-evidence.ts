import { SignJWT, type CryptoKey, type KeyObject } from 'jose';
import { sha256Hex } from './digest.js';
import type { Evidence } from './evidence.js';

export interface TestGpu {
  name?: string;
  measres?: string;
  secboot?: boolean;
  dbgstat?: string;
  driverVersion?: string;
  vbiosVersion?: string;
  model?: string;
}

export interface TestEvidenceOptions {
  /** The local verifier's ES384 private key (its public half goes in the gateway's ATTESTATION_JWKS). */
  key: CryptoKey | KeyObject;
  kid: string;
  issuer: string;
  eatNonce: string;
  /** @defaultValue one GPU that passes every check */
  gpus?: TestGpu[];
  /** @defaultValue 3600 */
  ttlSeconds?: number;
  overallResult?: boolean;
}

/**
 * Evidence in NRAS's shape signed by a local key: what `switchyard worker --tier private
 * --attestation-key <file>` presents in development and what tests use. It proves nothing
 * about hardware; it lets the whole private flow run end to end without a confidential GPU.
 */
export async function createTestEvidence(opts: TestEvidenceOptions): Promise<Evidence> {
  const now = Math.floor(Date.now() / 1000);
  const exp = now + (opts.ttlSeconds ?? 3600);
  const sign = (claims: Record<string, unknown>) =>
    new SignJWT(claims).setProtectedHeader({ alg: 'ES384', kid: opts.kid, typ: 'JWT' }).setIssuer(opts.issuer).setIssuedAt(now).setExpirationTime(exp).sign(opts.key);
  const gpus: Record<string, string> = {};
  const submods: Record<string, unknown> = {};
  for (const [i, g] of (opts.gpus ?? [{}]).entries()) {
    const name = g.name ?? `GPU-${i}`;
    const token = await sign({
      eat_nonce: opts.eatNonce,
      hwmodel: g.model ?? 'GH100 A01 GSP BROM',
      measres: g.measres ?? 'success',
      secboot: g.secboot ?? true,
      dbgstat: g.dbgstat ?? 'disabled',
      'x-nvidia-gpu-driver-version': g.driverVersion ?? '550.90.07',
      'x-nvidia-gpu-vbios-version': g.vbiosVersion ?? '96.00.9F.00.04',
    });
    gpus[name] = token;
    submods[name] = ['DIGEST', ['SHA-256', await sha256Hex(token)]];
  }
  const token = await sign({ eat_nonce: opts.eatNonce, 'x-nvidia-overall-att-result': opts.overallResult ?? true, submods });
  return { token, gpus };
}
