import { useState } from 'preact/hooks';
import type { Capabilities, JobResult } from '../../../sdk/client/index.js';
import { ErrorNote, Link } from '../components/common.js';
import { client } from '../lib/gateway.js';
import { navigate } from '../lib/router.js';
import { chainTargets, prefillPath, type ChainTarget } from './chain-targets.js';
import type { OutputFile } from './output-file.js';

/**
 * "Use as input": the kinds that take this file. When the file is all a kind needs, its button
 * submits the next run at once (same confidentiality as this one) and opens it; otherwise a link
 * opens the kind's form with the file filled in.
 */
export function ChainActions({ run, file, caps }: { run: JobResult; file: OutputFile; caps: Capabilities | null }) {
  const [busy, setBusy] = useState<string | null>(null);
  const [error, setError] = useState<unknown>(null);
  if (!caps) return null;
  const targets = chainTargets(caps, file);
  if (!targets.length) return null;

  async function submit(t: ChainTarget) {
    setBusy(t.kind);
    setError(null);
    try {
      // The URL as the gateway handed it out: it takes its own artifact URLs as file inputs.
      const next = await client().submit({ kind: t.kind, input: { [t.field]: file.url }, confidentiality: run.confidentiality });
      navigate(`/runs/${next.run_id}`);
    } catch (err) {
      setError(err);
      setBusy(null);
    }
  }

  return (
    <div class="chain">
      <p class="chain-title">Use as input</p>
      <ul class="chain-list">
        {targets.map((t) => (
          <li key={`${t.kind} ${t.field}`}>
            {t.direct ? (
              <button type="button" class="button-small" disabled={busy !== null} onClick={() => void submit(t)}>
                Send to {t.kind}
              </button>
            ) : (
              <Link to={prefillPath(t.kind, t.field, file.url)} class="button button-small">
                Open {t.kind} with it{t.field !== 'image' && t.field !== 'mesh' && t.field !== 'audio' ? ` as ${t.field}` : ''}
              </Link>
            )}
          </li>
        ))}
      </ul>
      <p class="visually-hidden" role="status">
        {busy ? `Submitting ${busy}…` : ''}
      </p>
      <ErrorNote error={error} title="Not sent" />
    </div>
  );
}
