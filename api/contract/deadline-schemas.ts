/**
 * A job's deadlines (docs/jobs.md, "Deadlines"): what a submission may ask (`ttl_s`,
 * `timeout_s`) and what the job object shows, with the instant each falls due. They feed the
 * submission and job schemas of schemas.ts and the OpenAPI document.
 */

const nullable = (schema: object) => ({ anyOf: [schema, { type: 'null' }] });
const seconds = { type: 'integer', minimum: 1, maximum: 31_536_000 } as const;
const isoTime = { type: 'string', format: 'date-time' } as const;

/** The submission's fields. */
export const deadlineFields = {
  ttl_s: {
    ...seconds,
    description: "Seconds the job may wait in its queue to start; not started by then, it fails `expired` and its credits come back. Default and most allowed: its kind's (`JOB_DEADLINES`; docs/jobs.md, \"Deadlines\").",
  },
  timeout_s: {
    ...seconds,
    description: "Seconds each attempt may run; past it the worker is told to cancel and the run fails `timed_out`. Default and most allowed: its kind's (`JOB_DEADLINES`).",
  },
} as const;

/** The job object's fields. */
export const deadlineViewFields = {
  ttl_s: nullable({ ...seconds, description: 'Seconds the job may wait to start; null: forever.' }),
  timeout_s: nullable({ ...seconds, description: 'Seconds an attempt may run; null: unbounded.' }),
  expires_at: nullable({ ...isoTime, description: 'When the job expires if it has not started: `created_at` + `ttl_s`.' }),
  timeout_at: nullable({ ...isoTime, description: 'While running: when the current attempt times out. Null otherwise.' }),
} as const;
