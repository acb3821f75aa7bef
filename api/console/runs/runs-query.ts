import type { JobStatus } from '../../../sdk/client/index.js';

/**
 * What the runs list shows, as its URL query says it: so a filtered page is a link that
 * survives reload and Back. `cursors` is the path paged so far (the cursor of page 2, of page
 * 3, ... up to this one): the API pages forward only, so Previous drops the last one.
 */
export interface RunsQuery {
  kind: string;
  status: JobStatus | '';
  cursors: string[];
}

export const STATUSES: readonly JobStatus[] = ['queued', 'running', 'succeeded', 'failed', 'canceled'];

/** A cursor of the API is base64url; anything else in the URL is ignored rather than sent. */
const CURSOR = /^[A-Za-z0-9_-]{1,200}$/;

export function readRunsQuery(q: URLSearchParams): RunsQuery {
  const status = q.get('status') ?? '';
  return {
    kind: (q.get('kind') ?? '').slice(0, 100),
    status: (STATUSES as readonly string[]).includes(status) ? (status as JobStatus) : '',
    cursors: (q.get('cursors') ?? '').split(',').filter((c) => CURSOR.test(c)),
  };
}

/** The console path of a runs view: `/runs?kind=...&status=...&cursors=...`, empty parts left out. */
export function runsPath(q: RunsQuery): string {
  const p = new URLSearchParams();
  if (q.kind) p.set('kind', q.kind);
  if (q.status) p.set('status', q.status);
  if (q.cursors.length) p.set('cursors', q.cursors.join(','));
  const s = p.toString();
  return s ? `/runs?${s}` : '/runs';
}
