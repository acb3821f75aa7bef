import type { JobResult } from '../../../sdk/client/index.js';
import { Link, StatusBadge } from '../components/common.js';
import { formatDuration, formatTime } from '../lib/format.js';
import { DataTable } from '../components/data-table.js';

/**
 * One page of runs. A table at desktop width; at phone width each row stacks into a card whose
 * cells carry their column's name (stacked-table.css, from `data-label`), so nothing is squashed.
 */
export function RunsTable({ runs }: { runs: JobResult[] }) {
  return (
    <DataTable
      class="runs-table"
      caption="Runs, newest first"
      rows={runs}
      rowKey={(run) => run.run_id}
      rowAttrs={(run) => ({ 'data-run-id': run.run_id })}
      columns={[
        {
          label: 'Run',
          cell: (run) => (
            <Link to={`/runs/${encodeURIComponent(run.run_id)}`} class="mono">
              {run.run_id}
            </Link>
          ),
        },
        { label: 'Kind', cell: (run) => run.kind },
        { label: 'Status', cell: (run) => <StatusBadge status={run.status} /> },
        { label: 'Created', cell: (run) => <time dateTime={run.created_at}>{formatTime(run.created_at)}</time> },
        { label: 'Duration', cell: runDuration },
        { label: 'Cost', cell: runCost },
      ]}
    />
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
