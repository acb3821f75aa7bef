package switchyard

import (
	"encoding/json"
	"fmt"
)

// Status is a run's state.
type Status string

// The five states of a run (docs/api.md, "States").
const (
	StatusQueued    Status = "queued"
	StatusRunning   Status = "running"
	StatusSucceeded Status = "succeeded"
	StatusFailed    Status = "failed"
	StatusCanceled  Status = "canceled"
)

// Terminal is true for succeeded, failed and canceled: nothing changes a run after that.
func (s Status) Terminal() bool {
	return s == StatusSucceeded || s == StatusFailed || s == StatusCanceled
}

// Job is a run as the gateway describes it (the job object of docs/api.md).
type Job struct {
	RunID           string     `json:"run_id"`
	Kind            string     `json:"kind"`
	Status          Status     `json:"status"`
	Confidentiality string     `json:"confidentiality"`
	Class           string     `json:"class"`
	Priority        int        `json:"priority"`
	CreatedAt       string     `json:"created_at"`
	StartedAt       *string    `json:"started_at"`
	FinishedAt      *string    `json:"finished_at"`
	Progress        *float64   `json:"progress"`
	Attempts        int        `json:"attempts"`
	TTLSeconds      *int       `json:"ttl_s"`      // seconds it may wait to start; nil: none (docs/jobs.md)
	TimeoutSeconds  *int       `json:"timeout_s"`  // seconds each attempt may run; nil: none
	ExpiresAt       *string    `json:"expires_at"` // when it fails "expired" if it has not started
	TimeoutAt       *string    `json:"timeout_at"` // while running: when the current attempt times out
	QueuePosition   *int       `json:"queue_position"`
	WaitingReason   *string    `json:"waiting_reason"`
	WaitingRanks    []int      `json:"waiting_ranks"` // with "no_worker_for_rank": the ranks no worker could hold now, 0-based (docs/ranks.md)
	Output          *JobOutput `json:"output"`
	Error           *JobError  `json:"error"`
	MaxAttempts     *int       `json:"max_attempts"`
	RetryOnTimeout  bool       `json:"retry_on_timeout"`
	AttemptHistory  []Attempt  `json:"attempt_history"`
	Cost            *JobCost   `json:"cost"`  // credits held at submission, and taken when it ended (docs/jobs.md, "Cost")
	Usage           *JobUsage  `json:"usage"` // what the worker reported the run used; nil: nothing
	// Warnings of a submission: input fields no schema names, passed on to the worker as they are.
	Warnings []Warning `json:"warnings,omitempty"`
	// BatchID is the batch it was submitted in (Client.SubmitBatch); nil: submitted alone.
	BatchID *string `json:"batch_id"`
	// Input is the input the run was given, only from Get with WithInclude("input"): as the
	// gateway stored it, file fields as the references the run used (docs/api.md); nil otherwise.
	Input map[string]any `json:"input,omitempty"`
	// Terminal is the gateway's own flag or, where the answer has none (the 202 of a
	// submission), derived from Status.
	Terminal bool `json:"terminal"`
	// Raw is the answer's job object exactly as received, for fields this type does not name.
	Raw json.RawMessage `json:"-"`
}

// JobCost is what a job holds and costs: Charged is nil until it ends (0 unless it succeeded).
type JobCost struct {
	Reserved int64  `json:"reserved"`
	Charged  *int64 `json:"charged"`
}

// JobUsage is what a job's worker reported it used; a unit it did not report is nil.
type JobUsage struct {
	InputTokens  *int64   `json:"input_tokens,omitempty"`
	OutputTokens *int64   `json:"output_tokens,omitempty"`
	Seconds      *float64 `json:"seconds,omitempty"`
	Images       *int64   `json:"images,omitempty"`
}

// JobOutput is a succeeded run's output: the artifact URLs, a description of each, and the
// kind's own fields (in Fields, or read Raw).
type JobOutput struct {
	URLs  []string     `json:"urls"`
	Files []OutputFile `json:"files"`
	// Fields holds every field of the output, urls and files included, undecoded.
	Fields map[string]json.RawMessage `json:"-"`
}

// UnmarshalJSON keeps every field of the output in Fields beside the typed ones.
func (o *JobOutput) UnmarshalJSON(b []byte) error {
	type plain JobOutput
	if err := json.Unmarshal(b, (*plain)(o)); err != nil {
		return err
	}
	return json.Unmarshal(b, &o.Fields)
}

// OutputFile describes one artifact of a run, in the order of JobOutput.URLs.
type OutputFile struct {
	URL         string  `json:"url"`
	Name        string  `json:"name"`
	ContentType *string `json:"content_type"`
	Size        *int64  `json:"size"`
	SHA256      *string `json:"sha256"`
}

// JobError is why a run failed or was canceled (a run error, not an API error). Code is one of
// RunErrorCodes (docs/jobs.md, "Error codes"); Attempt the attempt it happened on (0: the job
// never started; nil from an older gateway).
type JobError struct {
	Code      string `json:"code"`
	Message   string `json:"message"`
	Retryable bool   `json:"retryable"`
	Attempt   *int   `json:"attempt"`
}

// Attempt is one lease of a run (Job.AttemptHistory, oldest first; Job.MaxAttempts is how many
// it may use, Job.RetryOnTimeout whether a timed-out one is retried; docs/jobs.md): an opaque
// id of its worker (stable per worker), the worker's tier, when it started and ended, and how
// it ended (nil Error: running, or succeeded).
type Attempt struct {
	Attempt   int       `json:"attempt"`
	Worker    *string   `json:"worker"`
	Tier      *string   `json:"tier"`
	StartedAt *string   `json:"started_at"`
	EndedAt   *string   `json:"ended_at"`
	Error     *JobError `json:"error"`
}

// Warning names an input field the gateway passed on without knowing it.
type Warning struct {
	Path    string `json:"path"`
	Message string `json:"message"`
}

// decodeJob reads a job object, fills Terminal where the answer lacks it, and keeps Raw.
func decodeJob(b []byte) (*Job, error) {
	var j Job
	if err := json.Unmarshal(b, &j); err != nil {
		return nil, &APIError{Status: 200, Code: CodeInvalidResponse, Message: "expected a job object: " + err.Error(), Body: b}
	}
	if j.RunID == "" {
		return nil, &APIError{Status: 200, Code: CodeInvalidResponse, Message: "expected a job object with a run_id", Body: b}
	}
	var flag struct {
		Terminal *bool `json:"terminal"`
	}
	_ = json.Unmarshal(b, &flag)
	if flag.Terminal == nil {
		j.Terminal = j.Status.Terminal()
	}
	j.Raw = append(json.RawMessage(nil), b...)
	return &j, nil
}

// SubmitRequest is the body of POST /v1/jobs.
type SubmitRequest struct {
	// Kind is one of the catalogue's kinds, e.g. "inference:image:generate".
	Kind string `json:"kind"`
	// Input must satisfy the kind's input schema; file fields take a file id, a URL or a data: URI.
	Input map[string]any `json:"input"`
	// Confidentiality is "open" (the default), "trusted" or "private".
	Confidentiality string `json:"confidentiality,omitempty"`
	// Class is "interactive", "standard" (the default) or "batch".
	Class string `json:"class,omitempty"`
	// Webhook is an https URL to notify.
	Webhook string `json:"webhook,omitempty"`
	// WebhookEventsFilter is a subset of "start", "output", "logs" and "completed".
	WebhookEventsFilter []string `json:"webhook_events_filter,omitempty"`
	// MaxAttempts is the leases the job may use (1: never retried); 0: the gateway's default.
	MaxAttempts int `json:"max_attempts,omitempty"`
	// RetryOnTimeout retries an attempt that ran past its timeout while attempts remain.
	RetryOnTimeout bool `json:"retry_on_timeout,omitempty"`
}

// ListParams filters GET /v1/jobs.
type ListParams struct {
	Status Status
	Kind   string
	// BatchID lists only the jobs of that batch (Client.SubmitBatch).
	BatchID string
	// Limit is the page size, 1 to 100; 0 means the gateway's default (20).
	Limit int
	// Cursor is the NextCursor of the previous page.
	Cursor string
}

// JobPage is one page of GET /v1/jobs, newest first.
type JobPage struct {
	Data []*Job
	// NextCursor is empty on the last page.
	NextCursor string
}

// TierCounts counts workers by confidentiality tier.
type TierCounts struct {
	Open    int `json:"open"`
	Trusted int `json:"trusted"`
	Private int `json:"private"`
}

// Capabilities is GET /v1/capabilities.
type Capabilities struct {
	Kinds []KindCapability `json:"kinds"`
	Raw   json.RawMessage  `json:"-"`
}

// KindCapability is one kind of the catalogue with its live workers.
type KindCapability struct {
	Kind            string               `json:"kind"`
	Rollout         string               `json:"rollout"`
	Description     string               `json:"description"`
	Workers         int                  `json:"workers"`
	WorkersByTier   TierCounts           `json:"workers_by_tier"`
	InputSchema     map[string]any       `json:"input_schema"`
	OutputArtifacts []KindOutputArtifact `json:"output_artifacts"`
	OutputSchema    map[string]any       `json:"output_schema"`
	Models          []ModelCapability    `json:"models"`
}

// KindOutputArtifact is a file a kind's succeeded run gives.
type KindOutputArtifact struct {
	Name        string `json:"name"`
	ContentType string `json:"content_type"`
	Description string `json:"description"`
	Always      bool   `json:"always"`
}

// ModelCapability is one model of a kind's catalogue.
type ModelCapability struct {
	ID            string         `json:"id"`
	Description   *string        `json:"description"`
	Workers       int            `json:"workers"`
	WorkersByTier TierCounts     `json:"workers_by_tier"`
	InputSchema   map[string]any `json:"input_schema"`
}

// Capacity is GET /v1/network/capacity.
type Capacity struct {
	Workers struct {
		Total  int        `json:"total"`
		ByTier TierCounts `json:"by_tier"`
	} `json:"workers"`
	Slots struct {
		Total int `json:"total"`
		Busy  int `json:"busy"`
		Free  int `json:"free"`
	} `json:"slots"`
	Jobs struct {
		Queued  int `json:"queued"`
		Running int `json:"running"`
	} `json:"jobs"`
	ByKind []struct {
		Kind      string `json:"kind"`
		Workers   int    `json:"workers"`
		SlotsFree int    `json:"slots_free"`
		Queued    int    `json:"queued"`
	} `json:"by_kind"`
	UpdatedAt string          `json:"updated_at"`
	Raw       json.RawMessage `json:"-"`
}

// File is an uploaded file (docs/files.md).
type File struct {
	ID          string `json:"id"`
	URL         string `json:"url"`
	Filename    string `json:"filename"`
	ContentType string `json:"content_type"`
	Size        int64  `json:"size"`
	SHA256      string `json:"sha256"`
	CreatedAt   string `json:"created_at"`
	ExpiresAt   string `json:"expires_at"`
}

// FilePage is one page of GET /v1/files, newest first.
type FilePage struct {
	Data       []File  `json:"data"`
	NextCursor *string `json:"next_cursor"`
	// Quota is what all of the account's files hold now (not only this page's); nil from a
	// gateway that does not send it.
	Quota *FileQuota `json:"quota"`
}

// FileQuota is the account's file storage: UsedBytes of QuotaBytes (the gateway's
// FILE_QUOTA_BYTES). An upload that would pass it is ErrQuotaExceeded.
type FileQuota struct {
	UsedBytes  int64 `json:"used_bytes"`
	QuotaBytes int64 `json:"quota_bytes"`
}

// The event names of a run's stream (docs/events.md).
const (
	EventStatus   = "status"
	EventProgress = "progress"
	EventLog      = "log"
	EventOutput   = "output"
	EventDone     = "done"
)

// Event is one event of a run's log.
type Event struct {
	// ID numbers the run's events 1, 2, 3...; resume after it with StreamOptions.LastEventID.
	ID int64
	// Event is one of EventStatus, EventProgress, EventLog, EventOutput, EventDone.
	Event string
	// Data is the event's JSON as sent.
	Data json.RawMessage
	// Job is the job object of a status or done event.
	Job *Job
	// Progress is the data of a progress event.
	Progress *ProgressData
	// Log is the data of a log event.
	Log *LogData
	// Output is the data of an output event.
	Output *OutputData
}

// ProgressData is a progress event's data.
type ProgressData struct {
	Progress float64 `json:"progress"`
	Message  string  `json:"message,omitempty"`
}

// LogData is a log event's data.
type LogData struct {
	Line string `json:"line"`
	TS   string `json:"ts"`
}

// OutputData is an output event's data: text streamed by an LLM kind.
type OutputData struct {
	Delta string `json:"delta"`
}

// String gives the id, the name and the data, for logs.
func (e Event) String() string {
	return fmt.Sprintf("%d %s %s", e.ID, e.Event, e.Data)
}
