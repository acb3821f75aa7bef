import { calculateJwkThumbprint, decodeProtectedHeader, errors, jwtVerify, type JWK, type JWTPayload, type JWTVerifyGetKey } from 'jose';
import { sha256Hex } from './digest.js';
import { AttestationError } from './errors.js';

/**
 * Attestation evidence as NVIDIA's attestation service (NRAS) issues it: an overall EAT (a
 * JWT) whose `submods` name one detached token per GPU by digest, and those GPU tokens.
 */
export interface Evidence {
  /** The overall token: `iss`, `exp`, `eat_nonce`, `x-nvidia-overall-att-result`, `submods`. */
  token: string;
  /** GPU name -> its token: `measres`, `secboot`, `dbgstat`, driver and VBIOS versions. */
  gpus: Record<string, string>;
}

export interface EvidencePolicy {
  /** The verifier's keys: `createLocalJWKSet(jwks)` or `createRemoteJWKSet(url)`. */
  keys: JWTVerifyGetKey;
  /** Expected `iss` of every token. */
  issuer: string;
  /** The `eat_nonce` the evidence must carry (see {@link eatNonceFor}). */
  eatNonce: string;
  /** Allowed driver versions; empty or absent: any. */
  driverVersions?: string[];
  /** Allowed VBIOS versions; empty or absent: any. */
  vbiosVersions?: string[];
  /** For checks at another time (audits of stored evidence). @defaultValue now */
  currentDate?: Date;
}

export interface VerifiedEvidence {
  /** The earliest expiry among the tokens: the evidence is good until then. */
  expiresAt: Date;
  gpus: Array<{ name: string; driverVersion: string; vbiosVersion: string; model: string | null }>;
}

/** Only ES384, as NRAS signs: `none`, HS* and everything else are refused before any key is looked up. */
const ALGORITHM = 'ES384';

/**
 * The `eat_nonce` that binds evidence to a receipt key: sha256 of the gateway's fresh nonce
 * and the key's RFC 7638 thumbprint. The worker asks its verifier for evidence over this
 * value, so evidence obtained for one key cannot vouch for another.
 */
export async function eatNonceFor(gatewayNonce: string, receiptKey: JWK): Promise<string> {
  return sha256Hex(`${gatewayNonce}.${await calculateJwkThumbprint(receiptKey, 'sha256')}`);
}

async function verifyToken(token: string, policy: EvidencePolicy, what: string): Promise<JWTPayload> {
  let alg: unknown;
  try {
    alg = decodeProtectedHeader(token).alg;
  } catch (err) {
    throw new AttestationError('malformed', `${what} is not a JWT`, { cause: err });
  }
  if (alg !== ALGORITHM) throw new AttestationError('bad_algorithm', `${what} is signed with ${String(alg)}; only ${ALGORITHM} is accepted`);
  try {
    const { payload } = await jwtVerify(token, policy.keys, { algorithms: [ALGORITHM], issuer: policy.issuer, currentDate: policy.currentDate, requiredClaims: ['exp'] });
    return payload;
  } catch (err) {
    if (err instanceof errors.JWKSNoMatchingKey) throw new AttestationError('unknown_key', `${what} names a key the verifier's key set does not have`, { cause: err });
    if (err instanceof errors.JWTExpired) throw new AttestationError('expired', `${what} has expired`, { cause: err });
    if (err instanceof errors.JWTClaimValidationFailed && err.claim === 'iss') throw new AttestationError('wrong_issuer', `${what} was not issued by ${policy.issuer}`, { cause: err });
    if (err instanceof errors.JWSSignatureVerificationFailed) throw new AttestationError('bad_signature', `${what} has an invalid signature`, { cause: err });
    if (err instanceof errors.JOSEAlgNotAllowed) throw new AttestationError('bad_algorithm', `${what}: ${err.message}`, { cause: err });
    throw new AttestationError('malformed', `${what}: ${(err as Error).message}`, { cause: err });
  }
}

const allowed = (list: string[] | undefined, value: string) => !list || list.length === 0 || list.includes(value);

/**
 * Checks evidence end to end: every token's signature (ES384, a key of the verifier's set),
 * issuer and expiry; the nonce; the overall result; that each GPU token is the one the overall
 * token names by digest; and per GPU measurements, secure boot, debug state and versions.
 *
 * @throws AttestationError naming the first check that failed.
 */
export async function verifyEvidence(evidence: Evidence, policy: EvidencePolicy): Promise<VerifiedEvidence> {
  if (!evidence || typeof evidence.token !== 'string' || !evidence.gpus || typeof evidence.gpus !== 'object') {
    throw new AttestationError('malformed', 'evidence must be {token, gpus: {name: token}}');
  }
  const overall = await verifyToken(evidence.token, policy, 'the overall attestation token');
  if (overall.eat_nonce !== policy.eatNonce) throw new AttestationError('wrong_nonce', 'the evidence was not made for this nonce and receipt key');
  if (overall['x-nvidia-overall-att-result'] !== true) throw new AttestationError('attestation_failed', 'the verifier reports the attestation as failed');
  const submods = overall.submods;
  if (!submods || typeof submods !== 'object') throw new AttestationError('malformed', 'the overall token has no submods');
  const names = Object.keys(submods as object);
  if (names.length === 0) throw new AttestationError('malformed', 'the evidence covers no GPU');
  let expiresAt = overall.exp! * 1000;
  const gpus: VerifiedEvidence['gpus'] = [];
  for (const name of names) {
    const token = evidence.gpus[name];
    if (typeof token !== 'string') throw new AttestationError('malformed', `no token for ${name}`);
    const digest = (submods as Record<string, unknown>)[name];
    const expected = Array.isArray(digest) && digest[0] === 'DIGEST' && Array.isArray(digest[1]) ? digest[1][1] : undefined;
    if (expected !== (await sha256Hex(token))) throw new AttestationError('malformed', `the token of ${name} is not the one the overall token names`);
    const gpu = await verifyToken(token, policy, `the token of ${name}`);
    if (gpu.eat_nonce !== policy.eatNonce) throw new AttestationError('wrong_nonce', `the token of ${name} was not made for this nonce`);
    if (gpu.measres !== 'success') throw new AttestationError('measurement_failed', `${name}: measurements do not match the reference values`);
    if (gpu.secboot !== true) throw new AttestationError('secure_boot_off', `${name}: secure boot is off`);
    if (gpu.dbgstat !== 'disabled') throw new AttestationError('debug_enabled', `${name}: debugging is enabled`);
    const driverVersion = String(gpu['x-nvidia-gpu-driver-version'] ?? '');
    const vbiosVersion = String(gpu['x-nvidia-gpu-vbios-version'] ?? '');
    if (!allowed(policy.driverVersions, driverVersion)) throw new AttestationError('version_not_allowed', `${name}: driver ${driverVersion} is not on the allow-list`);
    if (!allowed(policy.vbiosVersions, vbiosVersion)) throw new AttestationError('version_not_allowed', `${name}: VBIOS ${vbiosVersion} is not on the allow-list`);
    expiresAt = Math.min(expiresAt, gpu.exp! * 1000);
    gpus.push({ name, driverVersion, vbiosVersion, model: typeof gpu.hwmodel === 'string' ? gpu.hwmodel : null });
  }
  return { expiresAt: new Date(expiresAt), gpus };
}
