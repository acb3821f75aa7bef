import type { ComponentChildren } from 'preact';
import { useEffect, useRef } from 'preact/hooks';

let dialogs = 0;

/**
 * A modal question before something that cannot be undone (revoke a key, delete a file, cancel a run): the
 * native <dialog>, so focus stays inside it, Escape answers Cancel and focus goes back to the
 * button that opened it. Cancel has the focus first: Enter alone never destroys anything.
 */
export function ConfirmDialog({
  title,
  confirmLabel,
  cancelLabel = 'Cancel',
  busyLabel = 'Working…',
  busy,
  onConfirm,
  onCancel,
  children,
}: {
  title: string;
  confirmLabel: string;
  /** The safe choice. @defaultValue 'Cancel' */
  cancelLabel?: string;
  /** The confirm button while `busy`. @defaultValue 'Working…' */
  busyLabel?: string;
  busy?: boolean;
  onConfirm: () => void;
  onCancel: () => void;
  children: ComponentChildren;
}) {
  const ref = useRef<HTMLDialogElement>(null);
  const id = useRef(`confirm-${++dialogs}`).current;
  useEffect(() => {
    const d = ref.current;
    if (d && !d.open) d.showModal();
    return () => d?.close();
  }, []);
  return (
    <dialog
      ref={ref}
      class="confirm-dialog"
      aria-labelledby={`${id}-title`}
      aria-describedby={`${id}-body`}
      onCancel={(e) => {
        e.preventDefault();
        if (!busy) onCancel();
      }}
    >
      <h2 id={`${id}-title`}>{title}</h2>
      <div id={`${id}-body`}>{children}</div>
      <div class="row confirm-actions">
        <button type="button" autoFocus disabled={busy} onClick={onCancel}>
          {cancelLabel}
        </button>
        <button type="button" class="button-danger" disabled={busy} onClick={onConfirm}>
          {busy ? busyLabel : confirmLabel}
        </button>
      </div>
    </dialog>
  );
}
