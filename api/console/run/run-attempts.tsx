import type { JobAttempt } from '../../../sdk/client/index.js';
import { formatDuration, formatTime } from '../lib/format.js';

/** Every lease the run had, oldest first: which worker, on which tier, how it ended. */
export function RunAttempts({ attempts, max }: { attempts: JobAttempt[]; max: number | null | undefined }) {
  return (
    <section aria-labelledby="attempts-heading">
      <h2 id="attempts-heading">Attempts</h2>
      {attempts.length === 0 ? (
        <p class="muted">No attempt yet{max ? ` (it may use up to ${max})` : ''}.</p>
      ) : (
        <div class="table-scroll" tabIndex={0} role="region" aria-label="Attempts (scrolls sideways)">
          <table class="attempts">
            <caption class="visually-hidden">Attempts of this run{max ? `, at most ${max}` : ''}</caption>
            <thead>
              <tr>
                <th scope="col">#</th>
                <th scope="col">Worker</th>
                <th scope="col">Tier</th>
                <th scope="col">Started</th>
                <th scope="col">Ended</th>
                <th scope="col">Outcome</th>
              </tr>
            </thead>
            <tbody>
              {attempts.map((a) => (
                <tr key={a.attempt}>
                  <td>{a.attempt}</td>
                  <td class="mono">{a.worker ?? '—'}</td>
                  <td>{a.tier ?? '—'}</td>
                  <td>{formatTime(a.started_at)}</td>
                  <td>
                    {formatTime(a.ended_at)}
                    {a.started_at && a.ended_at ? <span class="muted"> ({formatDuration(a.started_at, a.ended_at)})</span> : null}
                  </td>
                  <td>
                    {a.error ? (
                      <>
                        <code>{a.error.code}</code> {a.error.message}
                      </>
                    ) : a.ended_at ? (
                      'ok'
                    ) : (
                      'running'
                    )}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </section>
  );
}
