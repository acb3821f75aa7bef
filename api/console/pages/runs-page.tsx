import '../styles/runs.css';
import { ErrorNote, Link, Loading, PageTitle } from '../components/common.js';
import { client } from '../lib/gateway.js';
import { navigate, useLocation } from '../lib/router.js';
import { useAsync } from '../lib/use-async.js';
import { RunsFilters } from '../runs/runs-filters.js';
import { RunsPager } from '../runs/runs-pager.js';
import { readRunsQuery, runsPath } from '../runs/runs-query.js';
import { RunsTable } from '../runs/runs-table.js';

/** Runs a page of the list holds. */
export const RUNS_PAGE_SIZE = 20;

/** The account's runs, newest first, filtered and paginated, the view in the URL (GET /v1/jobs). */
export function RunsPage() {
  const { query } = useLocation();
  const q = readRunsQuery(query);
  const view = runsPath(q);
  const caps = useAsync(() => client().capabilities(), []);
  // The answer carries the view it answers: until the new view's arrives, the old one is not this view's.
  const loaded = useAsync(
    async () => ({ view, page: await client().list({ kind: q.kind || undefined, status: q.status || undefined, limit: RUNS_PAGE_SIZE, cursor: q.cursors[q.cursors.length - 1] }) }),
    [view],
  );
  const settled = !loaded.loading && (loaded.error != null || loaded.data?.view === view);
  const page = { ...loaded, data: loaded.data?.page, loading: !settled };
  const filtered = q.kind !== '' || q.status !== '';
  const runs = page.data?.data ?? [];

  return (
    <section class="runs-page">
      <PageTitle>Runs</PageTitle>
      <RunsFilters query={q} kinds={caps.data?.kinds.map((k) => k.kind) ?? []} onChange={(next) => navigate(runsPath(next))} />
      <ErrorNote error={caps.error} title="Could not load the kinds" />
      <ErrorNote error={page.error} title="Could not load the runs" />
      <div class="runs-results" aria-busy={page.loading ? 'true' : 'false'} data-view={settled ? view : undefined}>
        {page.loading && !page.data ? <Loading what="the runs" /> : null}
        <p class="visually-hidden" role="status">
          {settled && page.data ? `Page ${q.cursors.length + 1}: ${runs.length} run${runs.length === 1 ? '' : 's'}` : ''}
        </p>
        {runs.length > 0 ? <RunsTable runs={runs} /> : null}
        {settled && page.data && runs.length === 0 ? <EmptyRuns filtered={filtered} paged={q.cursors.length > 0 || page.data.next_cursor !== null} /> : null}
        {page.data ? <RunsPager query={q} nextCursor={page.data.next_cursor} /> : null}
      </div>
    </section>
  );
}

function EmptyRuns({ filtered, paged }: { filtered: boolean; paged: boolean }) {
  // The API may answer an empty page that still has older runs after it (docs/api.md, "Listing").
  if (paged) return <p class="empty-state">No runs on this page; older ones may follow.</p>;
  if (filtered)
    return (
      <div class="empty-state">
        <p>No runs match these filters.</p>
        <p>
          <Link to="/runs">Show all runs</Link> or <Link to="/">try a kind</Link>.
        </p>
      </div>
    );
  return (
    <div class="empty-state">
      <p>No runs yet.</p>
      <p>
        <Link to="/">Try a kind</Link> to start one.
      </p>
    </div>
  );
}
