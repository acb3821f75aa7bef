import { AttestationError, verifyAttestation, type JobResult, type VerifiedAttestation } from '../../../sdk/client/index.js';
import { localUrl } from '../lib/gateway.js';

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
  { id: 'receipt-claims', label: 'The receipt names this run, this kind and the worker that attested', fails: (e) => e.code === 'receipt_mismatch' },
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
 * as the CSP wants. The input digest cannot be checked: the job object does not carry the
 * input, so that check is listed as skipped with the command that makes it.
 */
export async function verifyRun(job: JobResult, jwks: { keys: Array<Record<string, unknown>> }, keys: VerifierKeys): Promise<Verification> {
  const input: Check = {
    id: 'input',
    label: 'The input digest is the one the worker signed',
    outcome: 'skipped',
    detail: `the job object does not carry its input: check it where you have the input, with \`switchyard verify ${job.run_id} --input ...\``,
  };
  try {
    const result = await verifyAttestation(job, {
      jwks: jwks as Parameters<typeof verifyAttestation>[1]['jwks'],
      issuer: keys.issuer,
      driverVersions: keys.driver_versions,
      vbiosVersions: keys.vbios_versions,
      fetch: ((url: string) => fetch(localUrl(String(url)))) as typeof fetch,
    });
    return { ok: true, result, checks: [...STEPS.map((s) => ({ id: s.id, label: s.label, outcome: 'passed' as const, detail: passedDetail(s.id, result, keys) })), input] };
  } catch (err) {
    const e = err instanceof Error ? err : new Error(String(err));
    const failedAt = e instanceof AttestationError ? STEPS.findIndex((s) => s.fails(e)) : -1;
    // An error of no known check (a network failure, a key set jose cannot read) fails the first unreached one.
    const at = failedAt >= 0 ? failedAt : 0;
    const checks: Check[] = STEPS.map((s, i) => ({
      id: s.id,
      label: s.label,
      outcome: i < at ? 'passed' : i === at ? 'failed' : 'not checked',
      detail: i === at ? `${e instanceof AttestationError ? `${e.code}: ` : ''}${e.message}` : undefined,
    }));
    return { ok: false, error: e, checks: [...checks, input] };
  }
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
    case 'artifacts':
      return r.artifacts.map((a) => `${a.url.split('/').pop()}: ${a.sha256}`).join('\n');
    default:
      return undefined;
  }
}
