import { useEffect, useState } from 'preact/hooks';
import type { JobResult, JsonObject } from '../../../sdk/client/index.js';
import { ErrorNote } from '../components/common.js';
import { api } from '../lib/gateway.js';
import { verifyRun, type Verification, type VerifierKeys } from './attestation-checks.js';

const MARK: Record<string, string> = { passed: '✓', failed: '✗', 'not checked': '–', skipped: '–' };

/**
 * A private run's proof, checked in this browser: the evidence (the verifier's signature,
 * issuer, nonce, GPU state) and the receipt over the artifacts, with the client library's
 * verifyAttestation. The page may not reach NVIDIA's key set (CSP connect-src 'self'), so it
 * starts with the keys the gateway trusts and says so; pasting a JWKS obtained elsewhere makes
 * the check independent of the gateway. The input checked is the one the gateway reports for
 * the run: the worker signed its hash, so a gateway that reports another input fails the check.
 */
export function AttestationPanel({ job, input }: { job: JobResult; input?: JsonObject }) {
  const [gatewayKeys, setGatewayKeys] = useState<VerifierKeys>();
  const [keysError, setKeysError] = useState<unknown>();
  const [pasted, setPasted] = useState('');
  const [source, setSource] = useState<'gateway' | 'pasted'>('gateway');
  const [pasteError, setPasteError] = useState<string>();
  const [busy, setBusy] = useState(false);
  const [result, setResult] = useState<Verification>();

  const run = async (jwks: { keys: Array<Record<string, unknown>> }, keys: VerifierKeys, from: 'gateway' | 'pasted') => {
    setBusy(true);
    setSource(from);
    try {
      setResult(await verifyRun(job, jwks, keys, input));
    } finally {
      setBusy(false);
    }
  };

  useEffect(() => {
    api<VerifierKeys>('GET', '/v1/attestation/verifier-keys').then(
      (k) => {
        setGatewayKeys(k);
        setPasted(JSON.stringify({ keys: k.keys }, null, 2));
        void run(k, k, 'gateway');
      },
      (err: unknown) => setKeysError(err),
    );
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [job.run_id, input]);

  const verifyPasted = () => {
    setPasteError(undefined);
    let jwks: { keys?: unknown };
    try {
      jwks = JSON.parse(pasted) as { keys?: unknown };
    } catch (err) {
      setPasteError(`That is not JSON: ${(err as Error).message}`);
      return;
    }
    if (!jwks || !Array.isArray(jwks.keys)) {
      setPasteError('A JWKS is a JSON object with a "keys" array.');
      return;
    }
    void run(jwks as { keys: Array<Record<string, unknown>> }, gatewayKeys ?? { issuer: 'https://nras.attestation.nvidia.com', keys: [] }, 'pasted');
  };

  const failed = result?.checks.find((c) => c.outcome === 'failed');
  const inputSkipped = result?.checks.some((c) => c.id === 'input' && c.outcome !== 'passed');
  return (
    <section aria-labelledby="attestation-heading" class="card attestation">
      <h2 id="attestation-heading">Attestation</h2>
      <p>
        This run was private: an attested confidential-computing worker ran it and signed a receipt over what it made. This page checks that proof
        here, in your browser, with the client library's <code>verifyAttestation</code>.
      </p>
      <p class="hint">
        The input checked is the one the gateway reports for this run, shown above, with each input file downloaded here and hashed. The worker signed
        the hash of the input it was given, so an input reported other than the one it ran fails this check.
      </p>
      <ErrorNote error={keysError} title="The gateway gave no verifier keys" />
      {gatewayKeys ? (
        <p class="hint">
          Issuer expected: <code>{gatewayKeys.issuer}</code>. Keys:{' '}
          {source === 'gateway'
            ? "the ones the gateway trusts (GET /v1/attestation/verifier-keys). That is less independent than keys you fetch yourself: a gateway you do not trust could hand out its own. Paste your verifier's key set below to check without it."
            : 'the key set you pasted.'}
        </p>
      ) : null}
      <div role="status" aria-live="polite" class="attestation-outcome">
        {busy ? (
          <p>Verifying…</p>
        ) : result ? (
          result.ok ? (
            <p class="note note-ok">
              Verified: every check {inputSkipped ? 'made ' : ''}passed{source === 'pasted' ? ' with the pasted keys' : " with the gateway's keys"}
              {inputSkipped ? '; the input was not checked (below)' : ''}.
            </p>
          ) : (
            <p class="note note-error">
              Verification failed: {failed?.label ?? 'an unexpected error'} — {failed?.detail ?? result.error?.message}
            </p>
          )
        ) : null}
      </div>
      {result ? (
        <ul class="checks" aria-label="Checks">
          {result.checks.map((c) => (
            <li key={c.id} class={`check check-${c.outcome.replace(' ', '-')}`} data-check={c.id} data-outcome={c.outcome}>
              <span aria-hidden="true" class="check-mark">
                {MARK[c.outcome]}
              </span>{' '}
              <span class="check-label">{c.label}</span>: <strong class="check-outcome">{c.outcome}</strong>
              {c.detail ? <div class="check-detail mono">{c.detail}</div> : null}
            </li>
          ))}
        </ul>
      ) : null}
      <details class="verifier-keys">
        <summary>Use other verifier keys</summary>
        <label for="verifier-keys">Verifier keys (JWKS JSON)</label>
        <textarea id="verifier-keys" class="mono" rows={8} spellcheck={false} aria-describedby="verifier-keys-hint" value={pasted} onInput={(e) => setPasted((e.target as HTMLTextAreaElement).value)} />
        <p id="verifier-keys-hint" class="hint">
          The public key set of the attestation verifier (NVIDIA's is published at https://nras.attestation.nvidia.com/.well-known/jwks.json).
        </p>
        {pasteError ? (
          <p class="note note-error" role="alert">
            {pasteError}
          </p>
        ) : null}
        <button type="button" class="button-primary" disabled={busy} onClick={verifyPasted}>
          Verify with these keys
        </button>
      </details>
    </section>
  );
}
