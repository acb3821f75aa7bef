"""The codes a failed, canceled or expired job's ``error.code`` may carry (docs/jobs.md, "Error
codes"), each mapped to whether such a failure is retried by default. The gateway's own list is
models/run-error-codes.ts; test/run-error-codes.test.ts checks this copy is the same.
``budget_exceeded`` is the one never on a job: a submission refused by its account's budget."""

WORKER_LOST = "worker_lost"
TIMED_OUT = "timed_out"
EXPIRED = "expired"
CANCELED = "canceled"
RECEIPT_INVALID = "receipt_invalid"
INVALID_INPUT = "invalid_input"
ENGINE_ERROR = "engine_error"
UNSUPPORTED_KIND = "unsupported_kind"
UNSUPPORTED_MODEL = "unsupported_model"
UPSTREAM_UNAVAILABLE = "upstream_unavailable"
UPSTREAM_ERROR = "upstream_error"
UPSTREAM_FAILED = "upstream_failed"
UPSTREAM_BAD_RESPONSE = "upstream_bad_response"
INPUT_UNAVAILABLE = "input_unavailable"
INPUT_FETCH_FAILED = "input_fetch_failed"
UPLOAD_FAILED = "upload_failed"
BAD_OUTPUT = "bad_output"
OUTPUT_TOO_LARGE = "output_too_large"
PIPELINE_BROKEN = "pipeline_broken"
WORKER_STOPPING = "worker_stopping"
BUDGET_EXCEEDED = "budget_exceeded"

RUN_ERROR_CODES = {
    WORKER_LOST: True,
    TIMED_OUT: False,
    EXPIRED: False,
    CANCELED: False,
    RECEIPT_INVALID: True,
    INVALID_INPUT: False,
    ENGINE_ERROR: True,
    UNSUPPORTED_KIND: True,
    UNSUPPORTED_MODEL: True,
    UPSTREAM_UNAVAILABLE: True,
    UPSTREAM_ERROR: False,
    UPSTREAM_FAILED: True,
    UPSTREAM_BAD_RESPONSE: True,
    INPUT_UNAVAILABLE: False,
    INPUT_FETCH_FAILED: True,
    UPLOAD_FAILED: True,
    BAD_OUTPUT: False,
    OUTPUT_TOO_LARGE: False,
    PIPELINE_BROKEN: True,
    WORKER_STOPPING: True,
    BUDGET_EXCEEDED: False,
}
