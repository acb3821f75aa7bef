import { useEffect, useRef, useState } from 'preact/hooks';
import type { SwitchyardFile } from '../../../sdk/client/index.js';
import { downloadFile } from './file-download.js';

/**
 * A file's Download button, with a progress bar while its bytes arrive. The button stays
 * focusable while busy (aria-disabled, not disabled) so keyboard focus is not lost mid-download.
 * What happens is told through `onStatus` (the section's live region) and `onError`.
 */
export function FileDownloadButton({ file, onStatus, onError }: { file: SwitchyardFile; onStatus: (message: string) => void; onError: (err: unknown) => void }) {
  const [received, setReceived] = useState<number | null>(null);
  const aborter = useRef<AbortController | null>(null);
  // Leaving the page stops a download in flight.
  useEffect(() => () => aborter.current?.abort(), []);
  const busy = received !== null;

  const start = async () => {
    if (busy) return;
    const controller = new AbortController();
    aborter.current = controller;
    setReceived(0);
    onError(null);
    onStatus(`Downloading ${file.filename}…`);
    try {
      await downloadFile(file, setReceived, controller.signal);
      onStatus(`${file.filename} downloaded.`);
    } catch (err) {
      if (controller.signal.aborted) return;
      onStatus('');
      onError(err);
    } finally {
      if (!controller.signal.aborted) setReceived(null);
    }
  };

  return (
    <span class="file-download">
      <button type="button" class="button-small" aria-label={busy ? `Downloading… ${file.filename}` : `Download ${file.filename}`} aria-disabled={busy ? 'true' : undefined} data-busy={busy ? '' : undefined} onClick={() => void start()}>
        {busy ? 'Downloading…' : 'Download'}
      </button>
      {busy ? <progress max={file.size || 1} value={received} aria-label={`Downloading ${file.filename}`} /> : null}
    </span>
  );
}
