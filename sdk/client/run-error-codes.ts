/**
 * The codes a failed, canceled or expired job's `error.code` may carry (docs/jobs.md, "Error
 * codes"), each with whether such a failure is retried by default. The gateway's own list is
 * models/run-error-codes.ts; test/run-error-codes.test.ts checks this copy is the same.
 * `budget_exceeded` is the one never on a job: a submission refused by its account's budget.
 */
export const RUN_ERROR_CODES = {
  worker_lost: { retryable: true },
  timed_out: { retryable: false },
  expired: { retryable: false },
  canceled: { retryable: false },
  receipt_invalid: { retryable: true },
  invalid_input: { retryable: false },
  engine_error: { retryable: true },
  unsupported_kind: { retryable: true },
  unsupported_model: { retryable: true },
  upstream_unavailable: { retryable: true },
  upstream_error: { retryable: false },
  upstream_failed: { retryable: true },
  upstream_bad_response: { retryable: true },
  input_unavailable: { retryable: false },
  input_fetch_failed: { retryable: true },
  upload_failed: { retryable: true },
  bad_output: { retryable: false },
  output_too_large: { retryable: false },
  pipeline_broken: { retryable: true },
  worker_stopping: { retryable: true },
  budget_exceeded: { retryable: false },
} as const;

export type RunErrorCode = keyof typeof RUN_ERROR_CODES;
