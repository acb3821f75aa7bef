import type { JobAttempt } from '../../../sdk/client/index.js';
import { DataTable } from '../components/data-table.js';
import { formatDuration, formatTime } from '../lib/format.js';

/** Every lease the run had, oldest first: which worker, on which tier, how it ended. */
export function RunAttempts({ attempts, max }: { attempts: JobAttempt[]; max: number | null | undefined }) {
  return (
    <section aria-labelledby="attempts-heading">
      <h2 id="attempts-heading">Attempts</h2>
      {attempts.length === 0 ? (
        <p class="muted">No attempt yet{max ? ` (it may use up to ${max})` : ''}.</p>
      ) : (
        <DataTable
          class="attempts"
          caption={`Attempts of this run${max ? `, at most ${max}` : ''}`}
          phone="scroll"
          scrollLabel="Attempts (scrolls sideways)"
          rows={attempts}
          rowKey={(a) => a.attempt}
          columns={[
            { label: '#', cell: (a) => a.attempt },
            { label: 'Worker', class: 'mono', cell: (a) => a.worker ?? '—' },
            { label: 'Tier', cell: (a) => a.tier ?? '—' },
            { label: 'Started', cell: (a) => formatTime(a.started_at) },
            {
              label: 'Ended',
              cell: (a) => (
                <>
                  {formatTime(a.ended_at)}
                  {a.started_at && a.ended_at ? <span class="muted"> ({formatDuration(a.started_at, a.ended_at)})</span> : null}
                </>
              ),
            },
            { label: 'Outcome', cell: outcome },
          ]}
        />
      )}
    </section>
  );
}

/** How an attempt ended: its error, ok, or still running. */
function outcome(a: JobAttempt) {
  if (a.error)
    return (
      <>
        <code>{a.error.code}</code> {a.error.message}
      </>
    );
  return a.ended_at ? 'ok' : 'running';
}
