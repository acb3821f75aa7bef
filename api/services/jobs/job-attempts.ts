import { ApiError } from '../../../models/errors.js';

/** How many leases jobs may use (docs/jobs.md, "Attempts"): the default (JOB_MAX_ATTEMPTS) and the most a job may ask (JOB_MAX_ATTEMPTS_LIMIT). */
export interface AttemptLimits {
  default: number;
  limit: number;
}

/** The attempts a run gets: the submission's `max_attempts`, checked against the limit, else the default; and whether a timeout is retried. */
export function runAttempts(asked: { max_attempts?: number; retry_on_timeout?: boolean }, limits: AttemptLimits): { max_attempts: number; retry_on_timeout: boolean } {
  const max = asked.max_attempts;
  if (max !== undefined && max > limits.limit) {
    throw new ApiError('invalid_request', `max_attempts is at most ${limits.limit} (JOB_MAX_ATTEMPTS_LIMIT)`, { details: { path: '/max_attempts', max: limits.limit } });
  }
  return { max_attempts: max ?? limits.default, retry_on_timeout: asked.retry_on_timeout ?? false };
}
