import { useRef } from 'preact/hooks';
import { localUrl } from '../lib/gateway.js';
import type { OutputFile } from './output-file.js';

/**
 * An image inline, as a button that opens it at full size in a modal dialog (Escape, the Close
 * button or a click outside the image closes it, and focus returns to the thumbnail).
 */
export function ImageViewer({ file, alt }: { file: OutputFile; alt: string }) {
  const dialog = useRef<HTMLDialogElement>(null);
  const src = localUrl(file.url);
  return (
    <div class="image-view">
      <button type="button" class="image-zoom" aria-haspopup="dialog" onClick={() => dialog.current?.showModal()}>
        <img src={src} alt={alt} loading="lazy" decoding="async" />
        <span class="visually-hidden">, show {file.name} at full size</span>
      </button>
      <dialog
        ref={dialog}
        class="image-dialog"
        aria-label={`${file.name} at full size`}
        onClick={(e) => {
          if (e.target === dialog.current) dialog.current?.close();
        }}
      >
        <div class="image-dialog-bar">
          <span>{file.name}</span>
          <button type="button" class="button-small" onClick={() => dialog.current?.close()} autoFocus>
            Close
          </button>
        </div>
        <div class="image-dialog-body">
          <img src={src} alt={alt} />
        </div>
      </dialog>
    </div>
  );
}
