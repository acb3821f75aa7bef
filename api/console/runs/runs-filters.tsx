import { STATUSES, type RunsQuery } from './runs-query.js';

/**
 * Kind and status filters. Choosing one goes to the first page of the new view at once (no
 * submit button to find); the choice lands in the URL, so the view is a link.
 */
export function RunsFilters({ query, kinds, onChange }: { query: RunsQuery; kinds: string[]; onChange: (q: RunsQuery) => void }) {
  // A deep link may name a kind the live fleet no longer lists: keep it choosable.
  const kindOptions = query.kind && !kinds.includes(query.kind) ? [query.kind, ...kinds] : kinds;
  return (
    <form class="runs-filters" role="search" aria-label="Filter runs" onSubmit={(e) => e.preventDefault()}>
      <div>
        <label for="runs-kind">Kind</label>
        <select id="runs-kind" name="kind" value={query.kind} onChange={(e) => onChange({ ...query, kind: e.currentTarget.value, cursors: [] })}>
          <option value="">All kinds</option>
          {kindOptions.map((k) => (
            <option key={k} value={k}>
              {k}
            </option>
          ))}
        </select>
      </div>
      <div>
        <label for="runs-status">Status</label>
        <select id="runs-status" name="status" value={query.status} onChange={(e) => onChange({ ...query, status: e.currentTarget.value as RunsQuery['status'], cursors: [] })}>
          <option value="">All statuses</option>
          {STATUSES.map((s) => (
            <option key={s} value={s}>
              {s}
            </option>
          ))}
        </select>
      </div>
    </form>
  );
}
