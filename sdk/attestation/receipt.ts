import { CompactSign, compactVerify, importJWK, type CryptoKey, type JWK, type KeyObject } from 'jose';
import { AttestationError } from './errors.js';

/** What a private run's worker signs when it reports the run done. */
export interface ReceiptClaims {
  run_id: string;
  worker_id: string;
  kind: string;
  /**
   * sha256 (hex) of the canonical JSON of the input the worker was leased, each input file's
   * field replaced by `sha256:<hex>` of its bytes (`receiptInput`).
   */
  input_sha256: string;
  /** sha256 (hex) of each input file's bytes, by field; absent when the input has no files. */
  input_files?: Record<string, string>;
  /** sha256 (hex) of each artifact, in upload order. */
  artifacts: Array<{ name: string; sha256: string }>;
  /**
   * A ranked run's (signed by its last rank): the worker id holding each rank of the pipeline,
   * by index, as the lease's `rank.workers` names them; the last is `worker_id`. Absent for a
   * run leased whole.
   */
  ranks?: string[];
  /** Seconds since the epoch. */
  iat: number;
}

export const RECEIPT_TYP = 'switchyard-receipt+jws';
const ALGORITHM = 'ES384';

/** Signs a receipt with the worker's receipt key (generated on the worker, never leaves it). */
export async function signReceipt(key: CryptoKey | KeyObject, claims: ReceiptClaims): Promise<string> {
  return new CompactSign(new TextEncoder().encode(JSON.stringify(claims))).setProtectedHeader({ alg: ALGORITHM, typ: RECEIPT_TYP }).sign(key);
}

/**
 * Verifies a receipt's signature with the receipt key the evidence vouches for, then that it
 * says what the verifier expects: this run, this worker, this kind, this input, these artifacts,
 * and for a ranked run the worker of each rank.
 */
export async function verifyReceipt(
  receipt: string,
  receiptKey: JWK,
  expected: {
    run_id: string;
    worker_id: string;
    kind: string;
    input_sha256?: string;
    input_files?: Record<string, string>;
    artifact_sha256s?: string[];
    /** The pipeline's workers by rank for a ranked run, null for a run leased whole (the receipt must not name ranks); absent: not checked. */
    ranks?: string[] | null;
  },
): Promise<ReceiptClaims> {
  let payload: Uint8Array;
  try {
    const key = await importJWK(receiptKey, ALGORITHM);
    ({ payload } = await compactVerify(receipt, key, { algorithms: [ALGORITHM] }));
  } catch (err) {
    throw new AttestationError('bad_signature', `the receipt does not verify with the attested receipt key: ${(err as Error).message}`, { cause: err });
  }
  let claims: ReceiptClaims;
  try {
    claims = JSON.parse(new TextDecoder().decode(payload)) as ReceiptClaims;
  } catch (err) {
    throw new AttestationError('malformed', 'the receipt payload is not JSON', { cause: err });
  }
  const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
  if (!isObject(claims)) throw new AttestationError('malformed', 'the receipt payload is not a JSON object');
  if (claims.artifacts !== undefined && (!Array.isArray(claims.artifacts) || !claims.artifacts.every((a) => isObject(a) && typeof a.name === 'string' && typeof a.sha256 === 'string'))) {
    throw new AttestationError('malformed', 'the receipt artifacts must be a list of {name, sha256} strings');
  }
  if (claims.input_files !== undefined && (!isObject(claims.input_files) || !Object.values(claims.input_files).every((h) => typeof h === 'string'))) {
    throw new AttestationError('malformed', 'the receipt input_files must map each file field to a sha256 string');
  }
  if (claims.ranks !== undefined && (!Array.isArray(claims.ranks) || !claims.ranks.every((w) => typeof w === 'string'))) {
    throw new AttestationError('malformed', 'the receipt ranks must be a list of worker ids');
  }
  if (expected.input_files) checkInputFiles(claims.input_files ?? {}, expected.input_files);
  for (const field of ['run_id', 'worker_id', 'kind', 'input_sha256'] as const) {
    const want = expected[field];
    if (want !== undefined && claims[field] !== want) throw new AttestationError('receipt_mismatch', `the receipt's ${field} is ${JSON.stringify(claims[field])}, expected ${JSON.stringify(want)}`);
  }
  if (expected.ranks !== undefined) checkRanks(claims.ranks, expected.ranks);
  if (expected.artifact_sha256s) {
    const signed = (Array.isArray(claims.artifacts) ? claims.artifacts : []).map((a) => a.sha256).sort();
    const actual = [...expected.artifact_sha256s].sort();
    if (signed.length !== actual.length || signed.some((h, i) => h !== actual[i])) {
      throw new AttestationError('artifact_mismatch', 'the artifacts do not hash to what the receipt signs');
    }
  }
  return claims;
}

/** The receipt must sign every input file, each by the hash of its bytes, and no other. */
function checkInputFiles(signed: Record<string, string>, expected: Record<string, string>): void {
  for (const [field, sha256] of Object.entries(expected)) {
    if (!Object.hasOwn(signed, field)) throw new AttestationError('receipt_mismatch', `the receipt does not sign the input file ${field} (input_files.${field} is missing)`);
    if (signed[field] !== sha256) throw new AttestationError('receipt_mismatch', `the receipt's input_files.${field} is ${JSON.stringify(signed[field])}, expected ${JSON.stringify(sha256)}: the worker signed for other bytes`);
  }
  const extra = Object.keys(signed).filter((field) => !Object.hasOwn(expected, field));
  if (extra.length > 0) throw new AttestationError('receipt_mismatch', `the receipt signs input files the input does not have: ${extra.join(', ')}`);
}

/** A ranked run's receipt names exactly the pipeline's workers, rank by rank; a whole run's names none. */
function checkRanks(signed: string[] | undefined, expected: string[] | null): void {
  if (expected === null) {
    if (signed !== undefined) throw new AttestationError('receipt_mismatch', "the receipt names a pipeline's ranks, but the run was not leased as a pipeline");
    return;
  }
  if (signed === undefined) throw new AttestationError('receipt_mismatch', "the receipt of a ranked run must name the worker of each rank (ranks is missing)");
  if (signed.length !== expected.length || signed.some((w, i) => w !== expected[i])) {
    throw new AttestationError('receipt_mismatch', `the receipt's ranks are ${JSON.stringify(signed)}, expected ${JSON.stringify(expected)}`);
  }
}
