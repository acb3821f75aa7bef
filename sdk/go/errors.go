package switchyard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Sentinel errors, one per error code of the gateway (docs/api.md, "Errors"). An *APIError
// matches the sentinel of its code with errors.Is:
//
//	if errors.Is(err, switchyard.ErrInsufficientCredits) { ... }
//
// Codes a newer gateway may add match no sentinel; read APIError.Code.
var (
	ErrInvalidRequest       = errors.New("switchyard: invalid_request")
	ErrUnknownKind          = errors.New("switchyard: unknown_kind")
	ErrUnknownModel         = errors.New("switchyard: unknown_model")
	ErrInvalidSchema        = errors.New("switchyard: invalid_schema")
	ErrInvalidURL           = errors.New("switchyard: invalid_url")
	ErrURLBlocked           = errors.New("switchyard: url_blocked")
	ErrUnknownTool          = errors.New("switchyard: unknown_tool")
	ErrUnauthorized         = errors.New("switchyard: unauthorized")
	ErrInsufficientCredits  = errors.New("switchyard: insufficient_credits")
	ErrBudgetExceeded       = errors.New("switchyard: budget_exceeded")
	ErrForbidden            = errors.New("switchyard: forbidden")
	ErrNotFound             = errors.New("switchyard: not_found")
	ErrModelNotFound        = errors.New("switchyard: model_not_found")
	ErrMethodNotAllowed     = errors.New("switchyard: method_not_allowed")
	ErrConflict             = errors.New("switchyard: conflict")
	ErrNameConflict         = errors.New("switchyard: name_conflict")
	ErrIdempotencyConflict  = errors.New("switchyard: idempotency_conflict")
	ErrAlreadyTerminal      = errors.New("switchyard: already_terminal")
	ErrQuotaExceeded        = errors.New("switchyard: quota_exceeded")
	ErrPayloadTooLarge      = errors.New("switchyard: payload_too_large")
	ErrUnsupportedMediaType = errors.New("switchyard: unsupported_media_type")
	ErrRangeNotSatisfiable  = errors.New("switchyard: range_not_satisfiable")
	ErrMaxSteps             = errors.New("switchyard: max_steps")
	ErrRateLimited          = errors.New("switchyard: rate_limited")
	ErrHeadersTooLarge      = errors.New("switchyard: headers_too_large")
	ErrInternal             = errors.New("switchyard: internal")
	ErrUnavailable          = errors.New("switchyard: unavailable")
	// ErrInvalidResponse is the code of an answer that is not what the contract promises:
	// an error status without the envelope (a proxy's HTML page), or a body that is not JSON.
	ErrInvalidResponse = errors.New("switchyard: invalid_response")
	// ErrTimeout matches every *TimeoutError.
	ErrTimeout = errors.New("switchyard: timeout")
)

// CodeInvalidResponse is APIError.Code for an answer that is not the contract's JSON.
const CodeInvalidResponse = "invalid_response"

// errorsByCode maps each code of models/errors.ts to its sentinel; a test checks it against
// that file so a code added to the gateway cannot be forgotten here.
var errorsByCode = map[string]error{
	"invalid_request":        ErrInvalidRequest,
	"unknown_kind":           ErrUnknownKind,
	"unknown_model":          ErrUnknownModel,
	"invalid_schema":         ErrInvalidSchema,
	"invalid_url":            ErrInvalidURL,
	"url_blocked":            ErrURLBlocked,
	"unknown_tool":           ErrUnknownTool,
	"unauthorized":           ErrUnauthorized,
	"insufficient_credits":   ErrInsufficientCredits,
	"budget_exceeded":        ErrBudgetExceeded,
	"forbidden":              ErrForbidden,
	"not_found":              ErrNotFound,
	"model_not_found":        ErrModelNotFound,
	"method_not_allowed":     ErrMethodNotAllowed,
	"conflict":               ErrConflict,
	"name_conflict":          ErrNameConflict,
	"idempotency_conflict":   ErrIdempotencyConflict,
	"already_terminal":       ErrAlreadyTerminal,
	"quota_exceeded":         ErrQuotaExceeded,
	"payload_too_large":      ErrPayloadTooLarge,
	"unsupported_media_type": ErrUnsupportedMediaType,
	"range_not_satisfiable":  ErrRangeNotSatisfiable,
	"max_steps":              ErrMaxSteps,
	"rate_limited":           ErrRateLimited,
	"headers_too_large":      ErrHeadersTooLarge,
	"internal":               ErrInternal,
	"unavailable":            ErrUnavailable,
	CodeInvalidResponse:      ErrInvalidResponse,
}

// SentinelFor returns the sentinel error of a code, or nil for a code this client does not know.
func SentinelFor(code string) error {
	return errorsByCode[code]
}

// APIError is an error answer of the gateway, with its envelope
// {"error": {"code", "message", "details"?}}.
type APIError struct {
	// Status is the HTTP status.
	Status int
	// Code is the envelope's stable code (see the Err* sentinels), or "invalid_response".
	Code string
	// Message is meant for people and may change.
	Message string
	// Details is the envelope's details object (schema errors, needed/available credits,
	// the first run of an idempotency conflict...), nil when absent.
	Details map[string]any
	// RequestID is the answer's X-Request-Id, to quote when reporting a problem.
	RequestID string
	// RetryAfter is the answer's Retry-After, 0 when absent.
	RetryAfter time.Duration
	// Body is the answer's body as received.
	Body []byte
}

// Error gives the status, code, message and request id.
func (e *APIError) Error() string {
	s := fmt.Sprintf("switchyard: %d %s: %s", e.Status, e.Code, e.Message)
	if e.RequestID != "" {
		s += " (request " + e.RequestID + ")"
	}
	return s
}

// Is makes errors.Is(err, ErrNotFound) and the like true for the code's sentinel.
func (e *APIError) Is(target error) bool {
	s, ok := errorsByCode[e.Code]
	return ok && s == target
}

// Retryable is true for 5xx and 429: the same request may work later (see RetryAfter).
func (e *APIError) Retryable() bool {
	return e.Status >= 500 || e.Status == http.StatusTooManyRequests
}

// apiErrorFrom reads an error answer whose body has been read whole.
func apiErrorFrom(res *http.Response, body []byte) *APIError {
	e := &APIError{Status: res.StatusCode, RequestID: res.Header.Get("X-Request-Id"), Body: body}
	if ra := strings.TrimSpace(res.Header.Get("Retry-After")); ra != "" {
		if n, err := strconv.Atoi(ra); err == nil && n >= 0 {
			e.RetryAfter = time.Duration(n) * time.Second
		}
	}
	var env struct {
		Error *struct {
			Code    *string         `json:"code"`
			Message *string         `json:"message"`
			Details json.RawMessage `json:"details"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &env) == nil && env.Error != nil && env.Error.Code != nil {
		e.Code = *env.Error.Code
		e.Message = e.Code
		if env.Error.Message != nil {
			e.Message = *env.Error.Message
		}
		var details map[string]any
		if len(env.Error.Details) > 0 && json.Unmarshal(env.Error.Details, &details) == nil {
			e.Details = details
		}
		return e
	}
	e.Code = CodeInvalidResponse
	e.Message = fmt.Sprintf("HTTP %d without a Switchyard error body", res.StatusCode)
	return e
}

// NetworkError means the request got no complete answer: DNS, a refused or reset connection,
// a body cut short.
type NetworkError struct {
	// Op is the request, e.g. "GET /v1/jobs/run_...".
	Op  string
	Err error
}

// Error names the request and the transport's failure.
func (e *NetworkError) Error() string { return "switchyard: " + e.Op + " failed: " + e.Err.Error() }

// Unwrap returns the transport's error.
func (e *NetworkError) Unwrap() error { return e.Err }

// TimeoutError means a request, or a Wait as a whole, ran past its timeout (WithTimeout,
// WithDefaultTimeout, WaitOptions.Timeout). It matches ErrTimeout and
// context.DeadlineExceeded with errors.Is.
type TimeoutError struct {
	// Op is the request, or "wait <run id>".
	Op string
	// Timeout is the limit that was passed.
	Timeout time.Duration
	// RunID is set by Wait: the run it waited for, which keeps running.
	RunID string
	// LastJob is set by Wait: the last state it saw of the run, if any.
	LastJob *Job
}

// Error names the request, or the run Wait was waiting for and its last status.
func (e *TimeoutError) Error() string {
	s := fmt.Sprintf("switchyard: %s got no complete answer within %s", e.Op, e.Timeout)
	if e.RunID != "" {
		last := "unknown"
		if e.LastJob != nil {
			last = string(e.LastJob.Status)
		}
		s = fmt.Sprintf("switchyard: %s was not terminal after %s (last status: %s); it keeps running", e.RunID, e.Timeout, last)
	}
	return s
}

// Is makes errors.Is(err, ErrTimeout) and errors.Is(err, context.DeadlineExceeded) true.
func (e *TimeoutError) Is(target error) bool {
	return target == ErrTimeout || target == context.DeadlineExceeded
}

// StreamError means an event stream kept failing after its reconnects. Resume it with
// StreamOptions.LastEventID set to LastEventID.
type StreamError struct {
	RunID string
	// LastEventID is the id of the last event delivered, nil if none was.
	LastEventID *int64
	// Attempts is the number of failed connections in a row.
	Attempts int
	// Err is the last failure.
	Err error
}

// Error names the run, the failures and the event id to resume after.
func (e *StreamError) Error() string {
	last := "unset"
	if e.LastEventID != nil {
		last = strconv.FormatInt(*e.LastEventID, 10)
	}
	return fmt.Sprintf("switchyard: the event stream of %s failed %d times in a row (%v); resume after event %s", e.RunID, e.Attempts, e.Err, last)
}

// Unwrap returns the last failure.
func (e *StreamError) Unwrap() error { return e.Err }
