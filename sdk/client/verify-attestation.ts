import { createLocalJWKSet, createRemoteJWKSet, decodeJwt, type JWK } from 'jose';
import {
  AttestationError,
  eatNonceFor,
  inputDigest,
  sha256Hex,
  verifyEvidence,
  verifyReceipt,
  type Evidence,
  type ReceiptClaims,
  type VerifiedEvidence,
} from '../attestation/index.js';
import { submittedFileHashes, type InputFileProof } from './input-file-hashes.js';
import type { Job } from './types.js';

/** The `attestation` object of a private job (docs/confidentiality.md). */
export interface JobAttestation {
  tier: 'private';
  worker_id: string;
  nonce: string;
  receipt_key: JWK;
  evidence: Evidence;
  receipt: string;
  evidence_url?: string;
  verified_at?: string;
  /**
   * A ranked run's: the worker of each rank of its pipeline, by rank, the last being `worker_id`
   * (which signed the receipt). Only the last rank signs; each rank's evidence is at its
   * `evidence_url` while that worker is connected. Absent for a run leased whole.
   */
  ranks?: Array<{ rank: number; worker_id: string; evidence_url?: string }>;
}

export interface VerifyAttestationOptions {
  /** The verifier's keys: a JWKS object, or the URL it is published at (NVIDIA's, or your own). */
  jwks: { keys: JWK[] } | string | URL;
  /** @defaultValue 'https://nras.attestation.nvidia.com' */
  issuer?: string;
  /**
   * The input you submitted: its canonical hash must be the one the worker signed, and each of
   * its files the bytes the worker signed for. Bytes (Blob, Uint8Array) and data: URIs are
   * hashed here, http(s) URLs downloaded and hashed; a file id or `@path` needs `inputFiles`.
   */
  input?: unknown;
  /** The bytes (or hex sha256) of input files `input` names by reference, by field. */
  inputFiles?: Record<string, InputFileProof>;
  /** Allow-lists, as the gateway's (empty or absent: any). */
  driverVersions?: string[];
  vbiosVersions?: string[];
  /** @defaultValue globalThis.fetch */
  fetch?: typeof fetch;
}

export interface VerifiedAttestation {
  receipt: ReceiptClaims;
  evidence: VerifiedEvidence;
  artifacts: Array<{ url: string; sha256: string }>;
}

/**
 * Checks a private job's whole chain, trusting nothing the gateway says about it: the
 * evidence is signed by the verifier (ES384, a key of `jwks`), made for the gateway's nonce
 * and bound to the receipt key, and shows a confidential GPU with secure boot, no debugging
 * and matching measurements, as of the moment the receipt was signed; the receipt verifies
 * with that key and names this run, this kind and this worker; every artifact downloaded now
 * hashes to what the receipt signs; and, given `input`, the input hashes to it too, each of
 * its files by the bytes you sent. For a ranked run, the receipt names exactly the workers of
 * `ranks`, rank by rank, and the last of them signed it; a run leased whole names no ranks.
 *
 * @throws AttestationError naming the first failed check.
 */
export async function verifyAttestation(job: Job, opts: VerifyAttestationOptions): Promise<VerifiedAttestation> {
  const att = job.attestation as unknown as JobAttestation | null | undefined;
  if (job.confidentiality !== 'private' || !att) throw new AttestationError('malformed', 'only a private job carries an attestation');
  if (job.status !== 'succeeded' || !job.output) throw new AttestationError('malformed', `the job is ${job.status}: only a succeeded job has a receipt over its output`);
  if (typeof att.receipt !== 'string' || typeof att.nonce !== 'string' || !att.receipt_key || !att.evidence) {
    throw new AttestationError('malformed', 'the attestation lacks its receipt, nonce, receipt key or evidence');
  }
  const ranks = att.ranks === undefined ? null : rankWorkers(att);
  const keys = typeof opts.jwks === 'string' || opts.jwks instanceof URL ? createRemoteJWKSet(new URL(opts.jwks)) : createLocalJWKSet(opts.jwks);
  let signedAt: Date;
  let signedFiles: string[] = [];
  try {
    const claims = decodeJwt(att.receipt);
    signedAt = new Date((claims.iat ?? 0) * 1000);
    // Which fields the receipt calls files; their hashes are checked once its signature is.
    if (claims.input_files && typeof claims.input_files === 'object') signedFiles = Object.keys(claims.input_files);
  } catch {
    signedAt = new Date(NaN);
  }
  if (Number.isNaN(signedAt.getTime())) throw new AttestationError('malformed', 'the receipt carries no signing time');
  // The evidence must have held when the worker signed, however long ago that was.
  const evidence = await verifyEvidence(att.evidence, {
    keys,
    issuer: opts.issuer ?? 'https://nras.attestation.nvidia.com',
    eatNonce: await eatNonceFor(att.nonce, att.receipt_key),
    driverVersions: opts.driverVersions,
    vbiosVersions: opts.vbiosVersions,
    currentDate: signedAt,
  });
  const get = opts.fetch ?? globalThis.fetch;
  const artifacts: VerifiedAttestation['artifacts'] = [];
  for (const url of job.output.urls) {
    const res = await get(url);
    if (!res.ok) throw new AttestationError('artifact_mismatch', `could not download ${url}: HTTP ${res.status}`);
    artifacts.push({ url, sha256: await sha256Hex(new Uint8Array(await res.arrayBuffer())) });
  }
  const inputFiles = opts.input === undefined ? undefined : await submittedFileHashes(opts.input, signedFiles, opts.inputFiles, get);
  const receipt = await verifyReceipt(att.receipt, att.receipt_key, {
    run_id: job.run_id,
    worker_id: att.worker_id,
    kind: job.kind,
    input_sha256: opts.input === undefined ? undefined : await inputDigest(opts.input, inputFiles),
    input_files: inputFiles,
    artifact_sha256s: artifacts.map((a) => a.sha256),
    ranks,
  });
  return { receipt, evidence, artifacts };
}

/** A ranked attestation's workers by rank: a list of two or more, numbered 0, 1, 2..., the last the signer. */
function rankWorkers(att: JobAttestation): string[] {
  const list: unknown = att.ranks;
  if (!Array.isArray(list) || list.length < 2) throw new AttestationError('malformed', "the attestation's ranks must list the pipeline's ranks");
  const workers = list.map((r: unknown, i) => {
    const { rank, worker_id } = (r ?? {}) as { rank?: unknown; worker_id?: unknown };
    if (rank !== i || typeof worker_id !== 'string') throw new AttestationError('malformed', `the attestation's ranks[${i}] must be {rank: ${i}, worker_id}`);
    return worker_id;
  });
  if (workers.at(-1) !== att.worker_id) throw new AttestationError('receipt_mismatch', `the last rank's worker is ${JSON.stringify(workers.at(-1))}, but ${JSON.stringify(att.worker_id)} signed the receipt: the last rank signs a ranked run's receipt`);
  return workers;
}
