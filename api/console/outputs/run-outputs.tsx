import type { JobResult } from '../../../sdk/client/index.js';
import { localUrl } from '../lib/gateway.js';
import { formatBytes } from '../lib/format.js';

/** What a succeeded run made: each file, shown by its type, with its facts and a download link. */
export function RunOutputs({ run }: { run: JobResult }) {
  const files = (run.output as { files?: Array<{ url: string; name: string; content_type: string | null; size: number | null; sha256: string | null }> } | null)?.files ?? [];
  return (
    <section aria-labelledby="outputs-heading">
      <h2 id="outputs-heading">Outputs</h2>
      <ul>
        {files.map((f) => (
          <li key={f.url}>
            <a href={localUrl(f.url)} download={f.name}>
              {f.name}
            </a>{' '}
            <span class="muted">
              {f.content_type} · {formatBytes(f.size)}
            </span>
          </li>
        ))}
      </ul>
    </section>
  );
}
