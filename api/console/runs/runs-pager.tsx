import { Link } from '../components/common.js';
import { runsPath, type RunsQuery } from './runs-query.js';

/**
 * Previous and Next as links (each page is a URL, so it opens in a tab and survives reload).
 * The API pages forward with `next_cursor`; Previous is the same path with its last cursor dropped.
 */
export function RunsPager({ query, nextCursor }: { query: RunsQuery; nextCursor: string | null }) {
  const page = query.cursors.length + 1;
  if (page === 1 && !nextCursor) return null;
  return (
    <nav class="runs-pager" aria-label="Pages of runs">
      {page > 1 ? (
        <Link to={runsPath({ ...query, cursors: query.cursors.slice(0, -1) })} class="button">
          ← Previous
        </Link>
      ) : (
        <span class="runs-pager-spacer" />
      )}
      <span class="muted">Page {page}</span>
      {nextCursor ? (
        <Link to={runsPath({ ...query, cursors: [...query.cursors, nextCursor] })} class="button">
          Next →
        </Link>
      ) : (
        <span class="runs-pager-spacer" />
      )}
    </nav>
  );
}
