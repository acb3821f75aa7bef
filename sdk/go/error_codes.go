package switchyard

// The codes a failed, canceled or expired job's Error.Code may carry (docs/jobs.md, "Error
// codes"). The gateway's own list is models/run-error-codes.ts; test/run-error-codes.test.ts
// checks this copy is the same. RunErrorBudgetExceeded is the one never on a job: a submission
// refused by its account's budget.
const (
	RunErrorWorkerLost          = "worker_lost"
	RunErrorTimedOut            = "timed_out"
	RunErrorExpired             = "expired"
	RunErrorCanceled            = "canceled"
	RunErrorReceiptInvalid      = "receipt_invalid"
	RunErrorInvalidInput        = "invalid_input"
	RunErrorEngineError         = "engine_error"
	RunErrorUnsupportedKind     = "unsupported_kind"
	RunErrorUnsupportedModel    = "unsupported_model"
	RunErrorUpstreamUnavailable = "upstream_unavailable"
	RunErrorUpstreamError       = "upstream_error"
	RunErrorUpstreamFailed      = "upstream_failed"
	RunErrorUpstreamBadResponse = "upstream_bad_response"
	RunErrorInputUnavailable    = "input_unavailable"
	RunErrorInputFetchFailed    = "input_fetch_failed"
	RunErrorUploadFailed        = "upload_failed"
	RunErrorBadOutput           = "bad_output"
	RunErrorOutputTooLarge      = "output_too_large"
	RunErrorPipelineBroken      = "pipeline_broken"
	RunErrorWorkerStopping      = "worker_stopping"
	RunErrorBudgetExceeded      = "budget_exceeded"
)

// RunErrorCodes maps each run error code to whether such a failure is retried by default.
var RunErrorCodes = map[string]bool{
	RunErrorWorkerLost:          true,
	RunErrorTimedOut:            false,
	RunErrorExpired:             false,
	RunErrorCanceled:            false,
	RunErrorReceiptInvalid:      true,
	RunErrorInvalidInput:        false,
	RunErrorEngineError:         true,
	RunErrorUnsupportedKind:     true,
	RunErrorUnsupportedModel:    true,
	RunErrorUpstreamUnavailable: true,
	RunErrorUpstreamError:       false,
	RunErrorUpstreamFailed:      true,
	RunErrorUpstreamBadResponse: true,
	RunErrorInputUnavailable:    false,
	RunErrorInputFetchFailed:    true,
	RunErrorUploadFailed:        true,
	RunErrorBadOutput:           false,
	RunErrorOutputTooLarge:      false,
	RunErrorPipelineBroken:      true,
	RunErrorWorkerStopping:      true,
	RunErrorBudgetExceeded:      false,
}
