import type { JobResult } from '../../../sdk/client/index.js';
import { Link, StatusBadge } from '../components/common.js';
import { formatDuration, formatTime } from '../lib/format.js';
import '../styles/stacked-table.css';

/**
 * One page of runs. A table at desktop width; at phone width each row stacks into a card whose
 * cells carry their column's name (stacked-table.css, from `data-label`), so nothing is squashed.
 */
export function RunsTable({ runs }: { runs: JobResult[] }) {
  return (
    <table class="runs-table stacked-table">
      <caption class="visually-hidden">Runs, newest first</caption>
      <thead>
        <tr>
          <th scope="col">Run</th>
          <th scope="col">Kind</th>
          <th scope="col">Status</th>
          <th scope="col">Created</th>
          <th scope="col">Duration</th>
          <th scope="col">Cost</th>
        </tr>
      </thead>
      <tbody>
        {runs.map((run) => (
          <tr key={run.run_id} data-run-id={run.run_id}>
            <th scope="row" data-label="Run">
              <Link to={`/runs/${encodeURIComponent(run.run_id)}`} class="mono">
                {run.run_id}
              </Link>
            </th>
            <td data-label="Kind">{run.kind}</td>
            <td data-label="Status">
              <StatusBadge status={run.status} />
            </td>
            <td data-label="Created">
              <time dateTime={run.created_at}>{formatTime(run.created_at)}</time>
            </td>
            <td data-label="Duration">{runDuration(run)}</td>
            <td data-label="Cost">{runCost(run)}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

/** How long it ran (still running: until now); a run that never started has none. */
function runDuration(run: JobResult): string {
  if (!run.started_at) return '—';
  return formatDuration(run.started_at, run.finished_at ?? undefined);
}

/** What it was charged once ended; before that, what is held for it. */
function runCost(run: JobResult): string {
  const cost = run.cost;
  if (!cost) return '—';
  if (cost.charged != null) return `${cost.charged} credit${cost.charged === 1 ? '' : 's'}`;
  return `${cost.reserved} reserved`;
}
