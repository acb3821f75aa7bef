import type { JobResult } from '../../../sdk/client/index.js';

const WHY: Record<string, string> = { failed: 'The run failed', canceled: 'The run was canceled', expired: 'The run expired' };

/** How a failed, canceled or expired run ended: its code and message. */
export function RunError({ job }: { job: JobResult }) {
  if (!job.error) return null;
  const e = job.error;
  return (
    <div class="note note-error run-error" role="alert">
      <strong>{WHY[job.status] ?? 'Error'}: </strong>
      <code class="error-code">{e.code}</code> {e.message}
      <p class="hint">
        {e.retryable ? 'Retryable: submitting it again may succeed.' : 'Not retryable as it is.'}
        {e.attempt ? ` On attempt ${e.attempt}.` : ''}
        {e.reported_code ? ` The worker's own code: ${e.reported_code}.` : ''}
      </p>
    </div>
  );
}
