import type { SwitchyardFile } from '../../../sdk/client/index.js';
import { client } from '../lib/gateway.js';

/**
 * Downloads one of the account's files. GET /v1/files/{id}/content wants the key in the
 * Authorization header, which a link cannot send: the bytes are fetched with the session's key,
 * held as a Blob, and handed to the browser through a temporary `<a download>` on a blob URL.
 */

/** How long the blob URL outlives the click: browsers resolve it when the download starts, some only after the click's task. */
const REVOKE_AFTER_MS = 1_000;

/** Fetches the file's bytes, calling `onProgress(received)` as they arrive, then saves them under the file's name. */
export async function downloadFile(file: SwitchyardFile, onProgress: (received: number) => void, signal?: AbortSignal): Promise<void> {
  // The client's timeout bounds the wait for the headers only; a large file may take its time.
  const res = await client().files.content(file.id, { signal });
  const blob = await readBlob(res, onProgress);
  saveBlob(blob, file.filename ?? file.id);
}

/** The response's body as a Blob of its type, read chunk by chunk so progress can be shown. */
async function readBlob(res: Response, onProgress: (received: number) => void): Promise<Blob> {
  const type = res.headers.get('content-type') ?? 'application/octet-stream';
  if (!res.body) return new Blob([await res.arrayBuffer()], { type });
  const reader = res.body.getReader();
  const chunks: Uint8Array<ArrayBuffer>[] = [];
  let received = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    chunks.push(value as Uint8Array<ArrayBuffer>);
    received += value.byteLength;
    onProgress(received);
  }
  return new Blob(chunks, { type });
}

/** Saves a Blob as a download named `filename`, then lets the blob URL (and its memory) go. */
function saveBlob(blob: Blob, filename: string): void {
  const url = URL.createObjectURL(blob);
  const a = document.createElement('a');
  a.href = url;
  a.download = filename;
  a.hidden = true;
  document.body.append(a);
  try {
    a.click();
  } finally {
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), REVOKE_AFTER_MS);
  }
}
