import { useEffect, useRef, useState } from 'preact/hooks';
import type { JobResult } from '../../../sdk/client/index.js';
import { ErrorNote } from '../components/common.js';
import { client } from '../lib/gateway.js';

/**
 * Cancel, behind a confirmation: a modal <dialog> (focus moves into it, Escape or "Keep it
 * running" closes it, focus returns to the button), whose safe choice has the focus first.
 */
export function CancelRun({ runId, onCanceled }: { runId: string; onCanceled: (job: JobResult) => void }) {
  const dialog = useRef<HTMLDialogElement>(null);
  const opener = useRef<HTMLButtonElement>(null);
  const keep = useRef<HTMLButtonElement>(null);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>();
  const [open, setOpen] = useState(false);

  useEffect(() => {
    const d = dialog.current;
    if (!d) return;
    if (open && !d.open) {
      d.showModal();
      keep.current?.focus();
    } else if (!open && d.open) d.close();
  }, [open]);

  const close = () => {
    setOpen(false);
    opener.current?.focus();
  };
  const confirm = async () => {
    setBusy(true);
    setError(undefined);
    try {
      onCanceled(await client().cancel(runId));
      setOpen(false);
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };

  return (
    <>
      <button type="button" class="button-danger" ref={opener} onClick={() => setOpen(true)}>
        Cancel run
      </button>
      <dialog ref={dialog} class="confirm-dialog" aria-labelledby="cancel-title" aria-describedby="cancel-desc" onClose={() => setOpen(false)}>
        <h2 id="cancel-title">Cancel this run?</h2>
        <p id="cancel-desc">
          A queued run is canceled at once and its credits returned; a running one is stopped on its worker. This cannot be undone.
        </p>
        <ErrorNote error={error} title="Could not cancel" />
        <div class="row">
          <button type="button" class="button-danger" disabled={busy} onClick={() => void confirm()}>
            {busy ? 'Canceling…' : 'Yes, cancel it'}
          </button>
          <button type="button" ref={keep} disabled={busy} onClick={close}>
            Keep it running
          </button>
        </div>
      </dialog>
    </>
  );
}
