import type { JobResult, JobStatus, JsonObject } from './types.js';

/** The 202 of POST /v1/jobs/batch: every job accepted, in the order sent (docs/jobs.md, "Batches"). */
export interface BatchSubmitted {
  batch_id: string;
  created_at: string;
  /** Jobs in the batch. */
  size: number;
  /** Credits reserved for all of them. */
  price: number;
  /** The 202 of each job, as submit() gives it. */
  jobs: JobResult[];
  /** True when an earlier request with the same Idempotency-Key made the batch. */
  replayed: boolean;
  raw: JsonObject;
}

/** GET /v1/batches/{batch_id}, and the data of a batch stream's `done`. */
export interface Batch {
  batch_id: string;
  created_at: string;
  size: number;
  price: number;
  /** Its jobs by status now (jobs past retention are no longer counted). */
  counts: Record<JobStatus, number>;
  /** Every job has ended. */
  terminal: boolean;
}

/** POST /v1/batches/{batch_id}/cancel, in counts of jobs. */
export interface BatchCanceled {
  batch_id: string;
  /** Queued jobs canceled at once, their credits returned. */
  canceled: number;
  /** Running jobs whose workers were told to stop. */
  cancel_requested: number;
  /** Jobs that had ended already. */
  already_terminal: number;
}

/** One frame of GET /v1/batches/{batch_id}/events: a job's status, or the batch once every job has ended. */
export type BatchEvent = { id: number; event: 'status'; data: JobResult } | { id: number; event: 'done'; data: Batch };
