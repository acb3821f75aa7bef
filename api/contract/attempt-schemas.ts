/**
 * A job's attempts (docs/jobs.md, "Attempts"): what a submission may ask (`max_attempts`,
 * `retry_on_timeout`) and what the job object shows, every attempt included. They feed the
 * submission and job schemas of schemas.ts and the OpenAPI document.
 */
import { TIERS } from '../../models/kinds.js';
import { RUN_ERROR_CODE_NAMES } from '../../models/run-error-codes.js';

const nullable = (schema: object) => ({ anyOf: [schema, { type: 'null' }] });
const isoTime = { type: 'string', format: 'date-time' } as const;

/** The submission's fields. */
export const attemptFields = {
  max_attempts: {
    type: 'integer',
    minimum: 1,
    maximum: 100,
    description: 'Leases the job may use before it fails for good; 1: never retried. Default `JOB_MAX_ATTEMPTS`, at most `JOB_MAX_ATTEMPTS_LIMIT` (docs/jobs.md, "Attempts").',
  },
  retry_on_timeout: { type: 'boolean', default: false, description: 'Retry an attempt that ran past `timeout_s` while attempts remain (default: a timeout fails the job `timed_out`).' },
} as const;

/** A run's error: a code of docs/jobs.md, "Error codes", and the attempt it happened on. */
export const runError = {
  type: 'object',
  required: ['code', 'message', 'retryable'],
  properties: {
    code: { type: 'string', enum: [...RUN_ERROR_CODE_NAMES], description: 'docs/jobs.md, "Error codes".' },
    message: { type: 'string' },
    retryable: { type: 'boolean' },
    attempt: { type: 'integer', minimum: 0, description: 'The attempt it happened on; 0: the job never started.' },
    reported_code: { type: 'string', description: "A worker's own code when it is none of the list (then `code` is `engine_error`)." },
  },
} as const;

/** The job object's fields. */
export const attemptViewFields = {
  max_attempts: nullable({ type: 'integer', minimum: 1, description: "Leases the job may use; null: a job made before jobs set it (the gateway's `JOB_MAX_ATTEMPTS`)." }),
  retry_on_timeout: { type: 'boolean' },
} as const;

export const attemptHistory = {
  type: 'array',
  description: 'Every attempt, oldest first: which worker (an opaque id, stable per worker) of which tier took it, when, and how it ended (`error` null: running, or succeeded).',
  items: {
    type: 'object',
    required: ['attempt', 'worker', 'tier', 'started_at', 'ended_at', 'error'],
    properties: {
      attempt: { type: 'integer', minimum: 1 },
      worker: nullable({ type: 'string' }),
      tier: nullable({ enum: [...TIERS] }),
      started_at: nullable(isoTime),
      ended_at: nullable(isoTime),
      error: nullable(runError),
    },
  },
} as const;
