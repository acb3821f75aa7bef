import { RedisKeys } from '../../models/redis/keys.js';
import { randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import type { RedisClient } from '../../models/redis-connection.js';
import { createLocalJWKSet, createRemoteJWKSet, type JWK, type JWTVerifyGetKey } from 'jose';
import { AttestationError, eatNonceFor, verifyEvidence, type Evidence, type VerifiedEvidence } from '../../sdk/attestation/index.js';

/** The verifier settings of private workers (ATTESTATION_* in the gateway's configuration). */
export interface AttestationSettings {
  /** The verifier's JWKS: a file path or an https URL (NVIDIA's attestation service keys in production). Unset: private workers are refused. */
  jwks?: string;
  /** Expected `iss` of every token. @defaultValue 'https://nras.attestation.nvidia.com' */
  issuer: string;
  /** Allowed GPU driver versions; empty: any. */
  driverVersions: string[];
  /** Allowed VBIOS versions; empty: any. */
  vbiosVersions: string[];
  /** How long a gateway nonce may be answered. @defaultValue 120000 */
  nonceTtlMs: number;
  /** Fresh evidence is asked for this long before the current one expires. @defaultValue 300000 */
  refreshBeforeMs: number;
}

/** A private worker's current, verified evidence: what audits and run records point at. */
export interface WorkerAttestation {
  worker_id: string;
  /** The gateway nonce the evidence answers (its `eat_nonce` is sha256(nonce . thumbprint(receipt_key))). */
  nonce: string;
  receipt_key: JWK;
  evidence: Evidence;
  gpus: VerifiedEvidence['gpus'];
  verified_at: string;
  expires_at: string;
}

export interface AttestationServiceOptions {
  redis: RedisClient;
  prefix: string;
  config: AttestationSettings;
}

/**
 * Checks the evidence of private workers: issues single-use nonces (in Redis, so a worker may
 * answer through any instance and a nonce can never be answered twice), verifies evidence
 * against the configured verifier keys, and keeps each worker's current evidence for audits.
 */
export class AttestationService {
  private keys?: JWTVerifyGetKey;
  /** The key set as read from the file; a URL's is fetched when asked for (verifierKeys). */
  private fileJwks?: { keys: JWK[] };
  private fetched?: { at: number; jwks: Promise<{ keys: JWK[] }> };
  private readonly redisKeys: RedisKeys;

  constructor(private readonly opts: AttestationServiceOptions) {
    this.redisKeys = new RedisKeys(opts.prefix);
  }

  /** False when ATTESTATION_JWKS is unset: private workers are then refused. */
  get enabled(): boolean {
    return this.opts.config.jwks !== undefined;
  }

  /** Loads the verifier's keys once at boot (a file) or lazily with caching (a URL). */
  async start(): Promise<void> {
    const source = this.opts.config.jwks;
    if (!source) return;
    if (/^https?:\/\//.test(source)) {
      this.keys = createRemoteJWKSet(new URL(source));
      return;
    }
    const jwks = JSON.parse(await readFile(source, 'utf8')) as { keys?: JWK[] };
    if (!Array.isArray(jwks.keys)) throw new Error(`ATTESTATION_JWKS (${source}) is not a JWKS: it has no "keys" array`);
    this.fileJwks = jwks as { keys: JWK[] };
    this.keys = createLocalJWKSet(this.fileJwks);
  }

  /**
   * The verifier's public keys and what evidence is checked against (issuer, allow-lists), for
   * clients that verify runs themselves where they cannot fetch the verifier's key set (the
   * console, under its CSP). Null when the private tier is off. A URL's key set is fetched at
   * most every 5 minutes; private key members a file might hold are never handed out.
   */
  async verifierKeys(): Promise<{ issuer: string; keys: JWK[]; driver_versions: string[]; vbios_versions: string[] } | null> {
    const source = this.opts.config.jwks;
    if (!source) return null;
    let jwks = this.fileJwks;
    if (!jwks) {
      if (!this.fetched || Date.now() - this.fetched.at > JWKS_REFETCH_MS) {
        const jwksPromise = fetchJwks(source);
        this.fetched = { at: Date.now(), jwks: jwksPromise };
        jwksPromise.catch(() => (this.fetched = undefined));
      }
      jwks = await this.fetched.jwks;
    }
    return {
      issuer: this.opts.config.issuer,
      keys: jwks.keys.map(publicMembers),
      driver_versions: this.opts.config.driverVersions,
      vbios_versions: this.opts.config.vbiosVersions,
    };
  }

  private nonceKey = (nonce: string) => this.redisKeys.attestationNonce(nonce);
  private workerKey = (workerId: string) => this.redisKeys.attestationWorker(workerId);

  /** A fresh nonce for one worker connection; it expires after ATTESTATION_NONCE_TTL_MS. */
  async issueNonce(workerId: string): Promise<string> {
    const nonce = randomBytes(32).toString('base64url');
    await this.opts.redis.set(this.nonceKey(nonce), workerId, 'PX', this.opts.config.nonceTtlMs);
    return nonce;
  }

  /**
   * Verifies evidence a worker presents for `nonce` and its receipt key; consumes the nonce
   * whatever the outcome, so evidence can never be replayed. Records it as the worker's current
   * evidence on success.
   *
   * @throws AttestationError
   */
  async verify(workerId: string, nonce: string, receiptKey: JWK, evidence: Evidence): Promise<WorkerAttestation> {
    if (!this.keys) throw new AttestationError('attestation_failed', 'this gateway has no attestation verifier configured (ATTESTATION_JWKS)');
    const owner = typeof nonce === 'string' && nonce.length <= 100 ? await this.opts.redis.getdel(this.nonceKey(nonce)) : null;
    if (owner !== workerId) throw new AttestationError('wrong_nonce', 'the nonce is unknown, expired, already used or was issued to another worker');
    assertReceiptKey(receiptKey);
    const verified = await verifyEvidence(evidence, {
      keys: this.keys,
      issuer: this.opts.config.issuer,
      eatNonce: await eatNonceFor(nonce, receiptKey),
      driverVersions: this.opts.config.driverVersions,
      vbiosVersions: this.opts.config.vbiosVersions,
    });
    const record: WorkerAttestation = {
      worker_id: workerId,
      nonce,
      receipt_key: publicPart(receiptKey),
      evidence,
      gpus: verified.gpus,
      verified_at: new Date().toISOString(),
      expires_at: verified.expiresAt.toISOString(),
    };
    const ttl = verified.expiresAt.getTime() - Date.now();
    if (ttl > 0) await this.opts.redis.set(this.workerKey(workerId), JSON.stringify(record), 'PX', ttl);
    return record;
  }

  /** The worker's current evidence, or null once it has lapsed or the worker never attested. */
  async current(workerId: string): Promise<WorkerAttestation | null> {
    const raw = await this.opts.redis.get(this.workerKey(workerId));
    return raw ? (JSON.parse(raw) as WorkerAttestation) : null;
  }

  /** Drops a worker's evidence (it disconnected): audits then see it as gone. */
  async forget(workerId: string): Promise<void> {
    await this.opts.redis.del(this.workerKey(workerId));
  }
}

const JWKS_REFETCH_MS = 5 * 60_000;

async function fetchJwks(url: string): Promise<{ keys: JWK[] }> {
  const res = await fetch(url, { signal: AbortSignal.timeout(10_000), headers: { accept: 'application/json' } });
  if (!res.ok) throw new Error(`ATTESTATION_JWKS ${url} answered ${res.status}`);
  const jwks = (await res.json()) as { keys?: JWK[] };
  if (!Array.isArray(jwks.keys)) throw new Error(`ATTESTATION_JWKS ${url} is not a JWKS: it has no "keys" array`);
  return jwks as { keys: JWK[] };
}

/** A JWK without its private members (RFC 7518: d, p, q, dp, dq, qi, oth; k of a symmetric key). */
function publicMembers(key: JWK): JWK {
  const { d: _d, p: _p, q: _q, dp: _dp, dq: _dq, qi: _qi, oth: _oth, k: _k, ...pub } = key as JWK & { oth?: unknown };
  return pub;
}

/** Receipt keys are EC P-384 public keys (the receipts are ES384). */
function assertReceiptKey(key: JWK): void {
  if (!key || typeof key !== 'object' || key.kty !== 'EC' || key.crv !== 'P-384' || typeof key.x !== 'string' || typeof key.y !== 'string') {
    throw new AttestationError('malformed', 'receipt_key must be an EC P-384 public JWK');
  }
  if ('d' in key) throw new AttestationError('malformed', 'receipt_key must be the public key only (it carries "d")');
}

function publicPart(key: JWK): JWK {
  return { kty: key.kty, crv: key.crv, x: key.x, y: key.y };
}
