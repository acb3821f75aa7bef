import { useEffect, useState } from 'preact/hooks';
import { errorMessage, localUrl } from '../lib/gateway.js';
import { formatBytes } from '../lib/format.js';
import { mediaType, type OutputFile } from './output-file.js';

/** Text shown in the page at most: longer files show their beginning (the download has the rest). */
export const TEXT_CAP_BYTES = 256 * 1024;

/** The first `cap` bytes of a response, and whether there was more. */
async function readCapped(res: Response, cap: number): Promise<{ bytes: Uint8Array; cut: boolean }> {
  const reader = res.body?.getReader();
  if (!reader) return { bytes: new Uint8Array(await res.arrayBuffer()).slice(0, cap), cut: false };
  const parts: Uint8Array[] = [];
  let got = 0;
  let cut = false;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    parts.push(value);
    got += value.length;
    if (got > cap) {
      cut = true;
      await reader.cancel();
      break;
    }
  }
  const bytes = new Uint8Array(Math.min(got, cap));
  let at = 0;
  for (const p of parts) {
    bytes.set(p.subarray(0, Math.min(p.length, bytes.length - at)), at);
    at += p.length;
    if (at >= bytes.length) break;
  }
  return { bytes, cut };
}

/** A text or JSON file, fetched and shown as readable text (JSON indented), up to TEXT_CAP_BYTES. */
export function TextViewer({ file }: { file: OutputFile }) {
  const [text, setText] = useState<{ body: string; cut: boolean } | Error | null>(null);
  useEffect(() => {
    let gone = false;
    (async () => {
      const res = await fetch(localUrl(file.url));
      if (!res.ok) throw new Error(`the gateway answered ${res.status}`);
      const { bytes, cut } = await readCapped(res, TEXT_CAP_BYTES);
      let body = new TextDecoder().decode(bytes);
      const type = mediaType(file.content_type);
      if (!cut && (type === 'application/json' || type.endsWith('+json'))) {
        try {
          body = JSON.stringify(JSON.parse(body), null, 2);
        } catch {
          // Not JSON after all: shown as it is.
        }
      }
      if (!gone) setText({ body, cut });
    })().catch((err: unknown) => !gone && setText(err instanceof Error ? err : new Error(String(err))));
    return () => {
      gone = true;
    };
  }, [file.url]);

  if (text === null) return <p class="loading">Loading {file.name}…</p>;
  if (text instanceof Error) return <p class="note note-error">{file.name} could not be read: {errorMessage(text)}</p>;
  return (
    <div class="text-view">
      {/* Focusable: a long text scrolls, and a keyboard must be able to scroll it. */}
      <pre tabIndex={0} aria-label={`Contents of ${file.name}`} data-text-view>
        {text.body}
      </pre>
      {text.cut ? <p class="hint">Showing the first {formatBytes(TEXT_CAP_BYTES)}: download the file for the rest.</p> : null}
    </div>
  );
}
