import type { RunError } from './types.js';

/**
 * The one list of the codes a run's `error.code` may carry (docs/jobs.md, "Error codes"), with
 * whether such a failure is retried by default and what it means. The clients carry the same
 * list (sdk/client, sdk/python, sdk/go; test/run-error-codes.test.ts checks they agree).
 * `origin`: who says it: the gateway itself, a worker's `fail` report, or a refused submission
 * (an API error, never a run's). Protocol errors the gateway sends workers (`stale_lease`,
 * `bad_frame`, `unavailable`...) are no run outcome and are not here.
 */
export const RUN_ERROR_CODES = {
  worker_lost: { retryable: true, origin: 'gateway', meaning: 'the worker holding the attempt disconnected, stopped heartbeating or was lost with its gateway; retried while attempts remain' },
  timed_out: { retryable: false, origin: 'gateway', meaning: 'the attempt ran past its timeout_s; retried only with retry_on_timeout' },
  expired: { retryable: false, origin: 'gateway', meaning: 'the job did not start within its ttl_s' },
  canceled: { retryable: false, origin: 'gateway', meaning: 'the caller canceled the job' },
  receipt_invalid: { retryable: true, origin: 'gateway', meaning: "a private run's receipt was missing, could not be signed or was refused" },
  invalid_input: { retryable: false, origin: 'worker', meaning: 'the worker refused the input (it passed the schema, not the engine)' },
  engine_error: { retryable: true, origin: 'worker', meaning: "the engine failed without a more precise code (a worker's unknown code becomes this one)" },
  unsupported_kind: { retryable: true, origin: 'worker', meaning: 'the worker has no handler for the kind' },
  unsupported_model: { retryable: true, origin: 'worker', meaning: 'the worker does not serve the model (or its rank count)' },
  upstream_unavailable: { retryable: true, origin: 'worker', meaning: "the engine's backend could not be reached or was overloaded" },
  upstream_error: { retryable: false, origin: 'worker', meaning: "the engine's backend refused the request" },
  upstream_failed: { retryable: true, origin: 'worker', meaning: "the engine's backend accepted the request and then failed it" },
  upstream_bad_response: { retryable: true, origin: 'worker', meaning: "the engine's backend answered something the engine could not read" },
  input_unavailable: { retryable: false, origin: 'worker', meaning: "the gateway refused an input file's fetch (the file is gone, or not this lease's)" },
  input_fetch_failed: { retryable: true, origin: 'worker', meaning: 'fetching an input file failed on the way (the network, a 5xx)' },
  upload_failed: { retryable: true, origin: 'worker', meaning: 'an output artifact could not be uploaded' },
  bad_output: { retryable: false, origin: 'worker', meaning: "the engine's output is not valid JSON, or not of the shape the SDK takes" },
  output_too_large: { retryable: false, origin: 'worker', meaning: 'the output is over what a report frame carries; large results go as artifacts' },
  pipeline_broken: { retryable: true, origin: 'worker', meaning: "a ranked model's pipeline broke between ranks" },
  worker_stopping: { retryable: true, origin: 'worker', meaning: 'the worker stopped before finishing' },
  budget_exceeded: { retryable: false, origin: 'submission', meaning: "the account's monthly budget refused the charge (402 at submission, never a run's error)" },
} as const satisfies Record<string, { retryable: boolean; origin: 'gateway' | 'worker' | 'submission'; meaning: string }>;

export type RunErrorCode = keyof typeof RUN_ERROR_CODES;
export const RUN_ERROR_CODE_NAMES = Object.keys(RUN_ERROR_CODES) as RunErrorCode[];

/**
 * Older or other names workers send, and the public code each means: a worker SDK sending an
 * old code keeps working, the caller sees the one name.
 */
export const RUN_ERROR_ALIASES: Readonly<Record<string, RunErrorCode>> = {
  bad_input: 'invalid_input',
  bad_result: 'bad_output',
  receipt_failed: 'receipt_invalid',
};

export const isRunErrorCode = (code: string): code is RunErrorCode => Object.hasOwn(RUN_ERROR_CODES, code);

/**
 * A worker's `fail` error as the run records it: its code one of the list (an alias mapped, an
 * unknown code turned `engine_error` and kept as `reported_code`), its `retryable` the worker's.
 */
export function normalizeRunError(error: RunError): RunError {
  if (isRunErrorCode(error.code)) return error;
  const code = RUN_ERROR_ALIASES[error.code] ?? 'engine_error';
  return { ...error, code, reported_code: error.code };
}
