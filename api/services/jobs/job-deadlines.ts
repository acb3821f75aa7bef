import { ApiError } from '../../../models/errors.js';

/**
 * A kind's deadlines (docs/jobs.md, "Deadlines"): how long its jobs may wait to start
 * (`ttl_s`) and how long an attempt may run (`timeout_s`) when a submission does not say, and
 * the most a submission may ask for. A null default: no deadline unless the job asks for one.
 */
export interface KindDeadlines {
  ttl_s: number | null;
  max_ttl_s: number;
  timeout_s: number | null;
  max_timeout_s: number;
}

/** What every kind gets unless JOB_DEADLINES says otherwise: a day to start, an hour to run. */
export const BUILT_IN_DEADLINES: Readonly<KindDeadlines> = { ttl_s: 86_400, max_ttl_s: 604_800, timeout_s: 3_600, max_timeout_s: 86_400 };

/** The deadlines a run gets: the submission's, checked against its kind's maxima, else the kind's defaults. */
export function runDeadlines(asked: { ttl_s?: number; timeout_s?: number }, kind: string, limits: KindDeadlines, createdAt: string): { ttl_s: number | null; timeout_s: number | null; expires_at: string | null } {
  for (const [field, max] of [['ttl_s', limits.max_ttl_s], ['timeout_s', limits.max_timeout_s]] as const) {
    const v = asked[field];
    if (v !== undefined && v > max) {
      throw new ApiError('invalid_request', `${field} is at most ${max} for ${kind} (JOB_DEADLINES)`, { details: { path: `/${field}`, max } });
    }
  }
  const ttl = asked.ttl_s ?? limits.ttl_s;
  const timeout = asked.timeout_s ?? limits.timeout_s;
  return { ttl_s: ttl, timeout_s: timeout, expires_at: ttl === null ? null : new Date(Date.parse(createdAt) + ttl * 1000).toISOString() };
}
