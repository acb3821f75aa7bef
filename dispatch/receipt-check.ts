import { createHash } from 'node:crypto';
import type { WorkerAttestation } from './attestation/attestation-service.js';
import { ARTIFACT_ID_PATTERN, type ArtifactMeta, type ArtifactStore } from '../models/artifact-store.js';
import { inputFileHashes, type RunRecord } from '../models/types.js';
import { decodeJwt } from 'jose';
import { AttestationError, inputDigest, verifyReceipt } from '../sdk/attestation/index.js';
import type { JobAttestation } from '../sdk/client/verify-attestation.js';
import { parseArtifactUrl } from '../sdk/protocol/index.js';

/**
 * A private run's `attestation` once its receipt checked out: what the client library verifies
 * (docs/confidentiality.md, "Receipts"). `ranks` only for a ranked run.
 */
export type RunAttestation = Required<Omit<JobAttestation, 'ranks'>> & Pick<JobAttestation, 'ranks'>;

/** A receipt that checked out: the run's attestation, and the records of its artifacts as read for the check. */
export interface CheckedReceipt {
  attestation: RunAttestation;
  /** The record of each URL of `urls`, in order, its bytes re-hashed here: settlement describes `output.files` from them without reading again. */
  artifacts: ArtifactMeta[];
}

export interface ReceiptCheckerOptions {
  artifacts: ArtifactStore;
  publicUrl: () => string;
}

export interface ReceiptToCheck {
  run: RunRecord;
  leaseId: string;
  workerId: string;
  /** The worker connection's evidence, newest first (its current one, and the one before a refresh). */
  evidence: WorkerAttestation[];
  urls: string[];
  receipt: string | undefined;
  /** A rank lease's (the last rank's): the pipeline's worker ids by rank, which its receipt must sign. Absent for a whole lease. */
  ranks?: string[];
}

/** How far a receipt's `iat` may be from the gateway's clock. */
const MAX_CLOCK_SKEW_S = 300;

/**
 * Whether every token of the evidence held at `at` (seconds), as the client library checks it:
 * not yet expired, and past its `nbf` if it has one (its signatures were checked on arrival).
 */
function heldAt(record: WorkerAttestation, at: number): boolean {
  if (Date.parse(record.expires_at) <= at * 1000) return false;
  return [record.evidence.token, ...Object.values(record.evidence.gpus)].every((token) => {
    const { nbf } = decodeJwt(token);
    return typeof nbf !== 'number' || nbf <= at;
  });
}

async function sha256Of(stream: AsyncIterable<Uint8Array>): Promise<string> {
  const hash = createHash('sha256');
  for await (const chunk of stream) hash.update(chunk);
  return hash.digest('hex');
}

/**
 * Checks the receipt a private run completes with before the run may succeed, trusting
 * nothing the worker says about its output: the receipt must verify with the receipt key the
 * worker's evidence binds, be signed while that evidence held, name this run, worker and kind,
 * hash the input as stored, sign the sha256 of every input file as staged, and sign exactly the artifacts of `output.urls`, each uploaded
 * under this lease, hashed here from the bytes in storage. A rank lease's receipt (the last
 * rank's) must also name the worker of each rank of its pipeline, and a whole lease's none.
 * Throws `AttestationError` naming the first failed check.
 */
export class ReceiptChecker {
  constructor(private readonly opts: ReceiptCheckerOptions) {}

  async check(c: ReceiptToCheck): Promise<CheckedReceipt> {
    if (!c.receipt) throw new AttestationError('malformed', 'a private run completes with a receipt: a JWS over {run_id, worker_id, kind, input_sha256, artifacts, iat} signed with the attested receipt key');
    const now = Date.now();
    // Every piece of evidence of one connection binds the same receipt key.
    if (c.evidence.length === 0) throw new AttestationError('expired', 'the worker has no attestation evidence on this connection');
    const artifacts = await this.storedArtifacts(c);
    const inputFiles = inputFileHashes(c.run);
    const claims = await verifyReceipt(c.receipt, c.evidence[0].receipt_key, {
      run_id: c.run.run_id,
      worker_id: c.workerId,
      kind: c.run.kind,
      input_sha256: await inputDigest(c.run.input, inputFiles),
      input_files: inputFiles,
      artifact_sha256s: artifacts.map((a) => a.sha256),
      ranks: c.ranks ?? null,
    });
    const named = (list: Array<{ name: string; sha256: string }>) => list.map((a) => `${a.sha256} ${a.name}`).sort().join('\n');
    if (!Array.isArray(claims.artifacts) || named(claims.artifacts) !== named(artifacts)) {
      throw new AttestationError('artifact_mismatch', 'the receipt names the artifacts differently from their uploads');
    }
    if (typeof claims.iat !== 'number' || Math.abs(claims.iat - now / 1000) > MAX_CLOCK_SKEW_S) {
      throw new AttestationError('receipt_mismatch', `the receipt's iat must be its signing time, within ${MAX_CLOCK_SKEW_S} s of the gateway's clock`);
    }
    // Callers check the evidence as of `iat`, so the run carries the newest evidence that held
    // then: the current one, or the one a refresh replaced after the worker signed.
    const evidence = c.evidence.find((e) => heldAt(e, claims.iat));
    if (!evidence) throw new AttestationError('expired', "none of the worker's evidence was valid when the receipt was signed");
    const evidenceUrl = (workerId: string) => `${this.opts.publicUrl()}/v1/attestation/workers/${workerId}`;
    const attestation: RunAttestation = {
      tier: 'private',
      worker_id: c.workerId,
      nonce: evidence.nonce,
      receipt_key: evidence.receipt_key,
      evidence: evidence.evidence,
      receipt: c.receipt,
      evidence_url: evidenceUrl(c.workerId),
      verified_at: new Date(now).toISOString(),
      ...(c.ranks && { ranks: c.ranks.map((workerId, rank) => ({ rank, worker_id: workerId, evidence_url: evidenceUrl(workerId) })) }),
    };
    return { attestation, artifacts };
  }

  /** Each URL's artifact as stored: uploaded under this lease, its bytes unchanged since. */
  private async storedArtifacts(c: ReceiptToCheck): Promise<ArtifactMeta[]> {
    const store = this.opts.artifacts;
    const out: ArtifactMeta[] = [];
    for (const url of c.urls) {
      const ref = parseArtifactUrl(this.opts.publicUrl(), url);
      const meta = ref && ARTIFACT_ID_PATTERN.test(ref.id) ? await store.get(ref.id) : null;
      if (!ref || !meta || meta.name !== ref.name) throw new AttestationError('artifact_mismatch', `${url} is not an artifact stored by this gateway: a private run's output.urls are its own uploads`);
      if (meta.run_id !== c.run.run_id || meta.lease_id !== c.leaseId) throw new AttestationError('artifact_mismatch', `${url} was not uploaded under this lease`);
      // What callers will download is what the receipt must sign, not only what the upload recorded.
      if ((await sha256Of(await store.open(ref.id))) !== meta.sha256) throw new AttestationError('artifact_mismatch', `the stored bytes of ${url} changed after its upload`);
      out.push(meta);
    }
    return out;
  }
}
