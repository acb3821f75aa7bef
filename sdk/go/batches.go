package switchyard

import (
	"context"
	"encoding/json"
	"net/http"
)

// BatchSubmitted is the 202 of POST /v1/jobs/batch: every job accepted, in the order sent
// (docs/jobs.md, "Batches").
type BatchSubmitted struct {
	BatchID   string `json:"batch_id"`
	CreatedAt string `json:"created_at"`
	Size      int    `json:"size"`
	// Price is the credits reserved for all of its jobs.
	Price int    `json:"price"`
	Jobs  []*Job `json:"-"`
	// Replayed is true when an earlier request with the same Idempotency-Key made the batch.
	Replayed bool            `json:"-"`
	Raw      json.RawMessage `json:"-"`
}

// Batch is GET /v1/batches/{batch_id}, and the data of a batch stream's done event.
type Batch struct {
	BatchID   string `json:"batch_id"`
	CreatedAt string `json:"created_at"`
	Size      int    `json:"size"`
	Price     int    `json:"price"`
	// Counts are its jobs by status now (jobs past retention are no longer counted).
	Counts map[Status]int `json:"counts"`
	// Terminal is true once every job has ended.
	Terminal bool `json:"terminal"`
}

// BatchCanceled is the answer of POST /v1/batches/{batch_id}/cancel, in counts of jobs.
type BatchCanceled struct {
	BatchID string `json:"batch_id"`
	// Canceled counts queued jobs canceled at once (their credits returned).
	Canceled int `json:"canceled"`
	// CancelRequested counts running jobs whose workers were told to stop.
	CancelRequested int `json:"cancel_requested"`
	// AlreadyTerminal counts jobs that had ended already.
	AlreadyTerminal int `json:"already_terminal"`
}

// SubmitBatch sends POST /v1/jobs/batch: up to 1,000 jobs, all accepted or none. A refused
// batch is an *APIError matching ErrInvalidRequest whose Details["errors"] names each refused
// job by "index"; a balance short of the total matches ErrInsufficientCredits. File inputs are
// refused (submit such a job alone). WithIdempotencyKey covers the whole batch.
func (c *Client) SubmitBatch(ctx context.Context, jobs []SubmitRequest, opts ...RequestOption) (*BatchSubmitted, error) {
	rc := c.config(opts)
	header := http.Header{}
	if rc.idempotencyKey != "" {
		header.Set("Idempotency-Key", rc.idempotencyKey)
	}
	for i := range jobs {
		if jobs[i].Input == nil {
			jobs[i].Input = map[string]any{}
		}
	}
	body, res, err := c.callFull(ctx, rc, request{method: "POST", path: "/v1/jobs/batch", json: map[string]any{"jobs": jobs}, header: header})
	if err != nil {
		return nil, err
	}
	var raw struct {
		Jobs []json.RawMessage `json:"jobs"`
	}
	out := &BatchSubmitted{Raw: body, Replayed: res.Header.Get("Idempotent-Replayed") == "true"}
	if err := decode(body, out); err != nil {
		return nil, err
	}
	if err := decode(body, &raw); err != nil {
		return nil, err
	}
	for _, item := range raw.Jobs {
		job, err := decodeJob(item)
		if err != nil {
			return nil, err
		}
		out.Jobs = append(out.Jobs, job)
	}
	return out, nil
}

// GetBatch reads GET /v1/batches/{batch_id}: its jobs by status. List its jobs with
// ListParams.BatchID.
func (c *Client) GetBatch(ctx context.Context, batchID string, opts ...RequestOption) (*Batch, error) {
	body, err := c.call(ctx, c.config(opts), request{method: "GET", path: "/v1/batches/" + escape(batchID)})
	if err != nil {
		return nil, err
	}
	var b Batch
	return &b, decode(body, &b)
}

// CancelBatch sends POST /v1/batches/{batch_id}/cancel: every job not ended is canceled.
func (c *Client) CancelBatch(ctx context.Context, batchID string, opts ...RequestOption) (*BatchCanceled, error) {
	body, err := c.call(ctx, c.config(opts), request{method: "POST", path: "/v1/batches/" + escape(batchID) + "/cancel"})
	if err != nil {
		return nil, err
	}
	var out BatchCanceled
	return &out, decode(body, &out)
}

// StreamBatch follows every job of a batch over one stream (GET /v1/batches/{batch_id}/events):
// a status event (Event.Job) per job at first and per status change after, then done, whose
// Data is the Batch (DecodeBatch), once every job has ended. It resumes as Stream does.
func (c *Client) StreamBatch(ctx context.Context, batchID string, opts StreamOptions) *EventStream {
	s := c.Stream(ctx, batchID, opts)
	s.path = "/v1/batches/" + escape(batchID) + "/events"
	return s
}

// DecodeBatch reads the batch a batch stream's done event carries.
func DecodeBatch(data json.RawMessage) (*Batch, error) {
	var b Batch
	return &b, decode(data, &b)
}
