import { CopyButton } from '../components/common.js';
import { formatBytes } from '../lib/format.js';
import { localUrl } from '../lib/gateway.js';
import type { OutputFile } from './output-file.js';

/** A sha256 cut for reading: its first 12 and last 4 hex digits. */
export const shortSha = (sha: string): string => (sha.length > 20 ? `${sha.slice(0, 12)}…${sha.slice(-4)}` : sha);

/** A file's facts as the gateway recorded them, and its download link. */
export function FileFacts({ file }: { file: OutputFile }) {
  return (
    <div class="file-facts">
      <dl class="facts">
        <dt>Name</dt>
        <dd data-fact="name">{file.name}</dd>
        <dt>Size</dt>
        <dd data-fact="size">{formatBytes(file.size)}</dd>
        <dt>Type</dt>
        <dd data-fact="type">{file.content_type ?? '—'}</dd>
        <dt>SHA-256</dt>
        <dd data-fact="sha256">
          {file.sha256 ? (
            <>
              <code title={file.sha256} data-sha256={file.sha256}>
                {shortSha(file.sha256)}
              </code>{' '}
              <CopyButton text={file.sha256} label="Copy SHA-256" of={file.name} />
            </>
          ) : (
            '—'
          )}
        </dd>
      </dl>
      <a class="button button-small" href={localUrl(file.url)} download={file.name}>
        Download {file.name}
      </a>
    </div>
  );
}
