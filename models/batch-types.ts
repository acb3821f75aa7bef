import type { RunRecord, RunStatus } from './types.js';

/** Jobs one batch may hold at most (docs/jobs.md, "Batches"). */
export const MAX_BATCH_JOBS = 1000;

/** A batch of jobs submitted together (POST /v1/jobs/batch): created with all of its runs, in one atomic step. */
export interface BatchRecord {
  /** `batch_` and a ULID. */
  batch_id: string;
  account_id: string;
  created_at: string;
  /** Its runs' ids, in the order of the submission's `jobs`. */
  run_ids: string[];
  /** The credits reserved for all of its runs at creation (the sum of their prices). */
  price: number;
  idempotency_key: string | null;
}

/** What a batch submission asks the store to create alongside its runs. */
export type NewBatch = BatchRecord;

export type CreateBatchResult =
  /** Created with every run; `runs` in the order given, each with the priority the store fixed. */
  | { outcome: 'created'; batch: BatchRecord; runs: RunRecord[] }
  /** A batch with this id exists already (an idempotent replay): nothing was created. */
  | { outcome: 'exists'; batch: BatchRecord }
  | { outcome: 'insufficient_credits'; available: number }
  /** The account's monthly budget refused the batch's total (docs/jobs.md, "Cost"): nothing was created. */
  | { outcome: 'budget_exceeded'; budget: number; spent: number; reserved: number }
  | { outcome: 'no_account' }
  /** The batch's Idempotency-Key no longer names it (as a run's create, models/stores.ts): nothing was created. */
  | { outcome: 'claim_lost' };

/** A run of a batch as far as its counts need it. */
export type BatchMember = Pick<RunRecord, 'run_id' | 'status'>;

/** The runs of a batch by status. */
export type BatchCounts = Record<RunStatus, number>;

/** Where a batch stands: its runs by status (runs past retention are no longer counted). */
export interface BatchSummary {
  batch: BatchRecord;
  counts: BatchCounts;
  /** True once every run it still has is terminal. */
  terminal: boolean;
}
