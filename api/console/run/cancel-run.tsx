import { useRef, useState } from 'preact/hooks';
import type { JobResult } from '../../../sdk/client/index.js';
import { ErrorNote } from '../components/common.js';
import { ConfirmDialog } from '../components/confirm-dialog.js';
import { client } from '../lib/gateway.js';

/** Cancel, behind a confirmation whose safe choice ("Keep it running") has the focus first. */
export function CancelRun({ runId, onCanceled }: { runId: string; onCanceled: (job: JobResult) => void }) {
  const opener = useRef<HTMLButtonElement>(null);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>();
  const [open, setOpen] = useState(false);

  const close = () => {
    setOpen(false);
    setError(undefined);
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
      {open ? (
        <ConfirmDialog title="Cancel this run?" confirmLabel="Yes, cancel it" cancelLabel="Keep it running" busyLabel="Canceling…" busy={busy} onConfirm={() => void confirm()} onCancel={close}>
          <p>A queued run is canceled at once and its credits returned; a running one is stopped on its worker. This cannot be undone.</p>
          <ErrorNote error={error} title="Could not cancel" />
        </ConfirmDialog>
      ) : null}
    </>
  );
}
