import { AttestationError, verifyAttestation, type JobResult, type JsonObject, type VerifiedAttestation } from '../../../sdk/client/index.js';
import { authedFetch, client, gatewayBase, localUrl } from '../lib/gateway.js';
import { FILE_KEYWORD, inputSchema, type KindInfo } from '../try/kind-info.js';

/** The gateway's answer of GET /v1/attestation/verifier-keys: a JWKS, and what it checks evidence against. */
export interface VerifierKeys {
  issuer: string;
  keys: Array<Record<string, unknown>>;
  driver_versions?: string[];
  vbios_versions?: string[];
}

export type CheckOutcome = 'passed' | 'failed' | 'not checked' | 'skipped';

export interface Check {
  id: string;
  label: string;
  outcome: CheckOutcome;
  /** What passed (a value checked), or why it failed or was skipped. */
  detail?: string;
}

/**
 * The checks verifyAttestation makes, in the order it makes them. It stops at the first that
 * fails (an AttestationError naming it by code): those before it passed, those after were not
 * reached. `codes` are the error codes that mean this check failed.
 */
const INPUT_MISMATCH = /input_sha256|input_files|input file/;

const STEPS: Array<{ id: string; label: string; fails: (e: AttestationError) => boolean }> = [
  { id: 'shape', label: 'The attestation holds a receipt, a nonce, a receipt key and evidence', fails: (e) => e.code === 'malformed' && !/token|receipt payload|receipt (artifacts|input_files|ranks)/.test(e.message) },
  { id: 'evidence-signature', label: "Evidence signature: every token is signed (ES384) by a key of the verifier's key set", fails: (e) => ['bad_signature', 'unknown_key', 'bad_algorithm'].includes(e.code) && !/^the receipt/.test(e.message) },
  { id: 'evidence-issuer', label: 'Evidence issuer', fails: (e) => e.code === 'wrong_issuer' },
  { id: 'evidence-fresh', label: 'The evidence had not expired when the receipt was signed', fails: (e) => e.code === 'expired' },
  { id: 'nonce', label: "Nonce: the evidence answers the gateway's nonce and is bound to the receipt key", fails: (e) => e.code === 'wrong_nonce' },
  { id: 'gpu', label: 'GPU state: attestation passed, measurements match, secure boot on, debugging off', fails: (e) => ['attestation_failed', 'measurement_failed', 'secure_boot_off', 'debug_enabled'].includes(e.code) || (e.code === 'malformed' && /token|GPU/.test(e.message)) },
  { id: 'versions', label: "Driver and VBIOS versions are on the gateway's allow-lists", fails: (e) => e.code === 'version_not_allowed' },
  { id: 'artifacts-downloaded', label: 'Every artifact downloaded and hashed (sha256) in this browser', fails: (e) => e.code === 'artifact_mismatch' && /could not download/.test(e.message) },
  { id: 'receipt-signature', label: 'Receipt signature: it verifies with the attested receipt key', fails: (e) => (e.code === 'bad_signature' && /^the receipt/.test(e.message)) || (e.code === 'malformed' && /receipt/.test(e.message)) },
  // Before the claims: the receipt's input files are compared first, and a step not reached must not read as passed.
  { id: 'input', label: "The input digest: the input the gateway reports for this run hashes to the one the worker signed", fails: (e) => e.code === 'receipt_mismatch' && INPUT_MISMATCH.test(e.message) },
  { id: 'receipt-claims', label: 'The receipt names this run, this kind and the worker that attested', fails: (e) => e.code === 'receipt_mismatch' && !INPUT_MISMATCH.test(e.message) },
  { id: 'artifacts', label: "Each artifact's sha256 is one the receipt signs", fails: (e) => e.code === 'artifact_mismatch' },
];

/** What the panel shows after a verification: each check with its outcome. */
export interface Verification {
  ok: boolean;
  checks: Check[];
  error?: AttestationError | Error;
  result?: VerifiedAttestation;
}

/**
 * Verifies a private run's attestation in the browser with the client library, against `jwks`,
 * and lists what was checked. Artifacts are downloaded from the page's own origin (localUrl),
 * as the CSP wants. The input is the one the gateway reports (GET ?include=input): its digest,
 * with each file field replaced by the sha256 of the file's bytes, downloaded here, must be
 * the one the worker signed. A file that cannot be downloaded leaves the input not checked.
 */
export async function verifyRun(job: JobResult, jwks: { keys: Array<Record<string, unknown>> }, keys: VerifierKeys, input?: JsonObject, skipReason?: string): Promise<Verification> {
  const given = skipReason ? { reason: skipReason } : input ? await inputProof(job, input) : { reason: 'the gateway did not give the input' };
  const notChecked = 'reason' in given ? `${given.reason}: check it where you have the input, with \`switchyard verify ${job.run_id} --input ...\`` : undefined;
  const mark = (checks: Check[]): Check[] => checks.map((c) => (c.id === 'input' && notChecked ? { ...c, outcome: 'not checked', detail: notChecked } : c));
  try {
    const result = await verifyAttestation(job, {
      jwks: jwks as Parameters<typeof verifyAttestation>[1]['jwks'],
      issuer: keys.issuer,
      driverVersions: keys.driver_versions,
      vbiosVersions: keys.vbios_versions,
      fetch: ((url: string) => fetch(localUrl(String(url)))) as typeof fetch,
      ...('files' in given ? { input, inputFiles: given.files } : {}),
    });
    return { ok: true, result, checks: mark(STEPS.map((s) => ({ id: s.id, label: s.label, outcome: 'passed' as const, detail: passedDetail(s.id, result, keys) }))) };
  } catch (err) {
    const e = err instanceof Error ? err : new Error(String(err));
    // The library could not hash a field of the input (one the receipt signs as a file that the
    // kind's schema here does not call one): check the rest without the input.
    if (e instanceof TypeError && 'files' in given && /^input(Files)?\./.test(e.message)) return verifyRun(job, jwks, keys, undefined, e.message);
    const failedAt = e instanceof AttestationError ? STEPS.findIndex((s) => s.fails(e)) : -1;
    // An error of no known check (a network failure, a key set jose cannot read) fails the first unreached one.
    const at = failedAt >= 0 ? failedAt : 0;
    const checks: Check[] = STEPS.map((s, i) => ({
      id: s.id,
      label: s.label,
      outcome: i < at ? 'passed' : i === at ? 'failed' : 'not checked',
      detail: i === at ? `${e instanceof AttestationError ? `${e.code}: ` : ''}${e.message}` : undefined,
    }));
    return { ok: false, error: e, checks: mark(checks) };
  }
}

/**
 * The bytes of each file field of the input, downloaded here: a file id from /v1/files, an
 * artifact URL from the page's origin. Which fields are files the kind's schema says (the
 * receipt signs those by their bytes, the rest as the JSON they are).
 */
async function inputProof(job: JobResult, input: JsonObject): Promise<{ files: Record<string, Uint8Array> } | { reason: string }> {
  let kind: KindInfo | undefined;
  try {
    kind = ((await client().capabilities()).kinds as KindInfo[]).find((k) => k.kind === job.kind);
  } catch (err) {
    return { reason: `the kind's schema could not be read to find its file fields (${(err as Error).message})` };
  }
  if (!kind) return { reason: `the gateway no longer lists ${job.kind}, so its file fields are unknown` };
  const { properties } = inputSchema(kind, typeof input.model === 'string' ? input.model : undefined);
  const files: Record<string, Uint8Array> = {};
  for (const [field, value] of Object.entries(input)) {
    if (!properties[field]?.[FILE_KEYWORD] || typeof value !== 'string') continue;
    const url = /^file_/.test(value) ? `${gatewayBase}/v1/files/${encodeURIComponent(value)}/content` : localUrl(value);
    // The session's key goes to the gateway only.
    if (!url.startsWith(`${gatewayBase}/`)) return { reason: `input.${field} (${value}) is not a file of this gateway, so it is not downloaded here to hash it` };
    const res = await authedFetch(url).catch((err: unknown) => err as Error);
    if (res instanceof Error || !res.ok) {
      return { reason: `input.${field} (${value}) could not be downloaded to hash it (${res instanceof Error ? res.message : `HTTP ${res.status}`}), so the input digest cannot be computed here` };
    }
    files[field] = new Uint8Array(await res.arrayBuffer());
  }
  return { files };
}

function passedDetail(id: string, r: VerifiedAttestation, keys: VerifierKeys): string | undefined {
  switch (id) {
    case 'evidence-issuer':
      return keys.issuer;
    case 'evidence-fresh':
      return `good until ${r.evidence.expiresAt.toISOString()}`;
    case 'gpu':
      return r.evidence.gpus.map((g) => `${g.name}${g.model ? ` (${g.model})` : ''}`).join(', ');
    case 'versions': {
      const seen = r.evidence.gpus.map((g) => `driver ${g.driverVersion || '?'}, VBIOS ${g.vbiosVersion || '?'}`).join('; ');
      const lists = keys.driver_versions?.length || keys.vbios_versions?.length;
      return `${seen}${lists ? '' : ' (the gateway allows any)'}`;
    }
    case 'receipt-claims':
      return `${r.receipt.run_id}, ${r.receipt.kind}, ${r.receipt.worker_id}, signed ${new Date(r.receipt.iat * 1000).toISOString()}`;
    case 'input':
      return `input_sha256 ${r.receipt.input_sha256}${Object.keys(r.receipt.input_files ?? {}).length ? `; files: ${Object.entries(r.receipt.input_files ?? {}).map(([f, h]) => `${f} ${h}`).join(', ')}` : ''}`;
    case 'artifacts':
      return r.artifacts.map((a) => `${a.url.split('/').pop()}: ${a.sha256}`).join('\n');
    default:
      return undefined;
  }
}
