package switchyard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// DefaultPollInterval is Wait's interval between polls when WaitOptions.Interval is 0.
const DefaultPollInterval = time.Second

// Submit sends POST /v1/jobs. The answer is the accepted run (202), or, with WithWait, the
// finished run (201) when it ended within the wait: check Job.Terminal. WithIdempotencyKey
// makes a retry of the same body answer the first run instead of creating another.
func (c *Client) Submit(ctx context.Context, req SubmitRequest, opts ...RequestOption) (*Job, error) {
	rc := c.config(opts)
	header := http.Header{}
	if rc.idempotencyKey != "" {
		header.Set("Idempotency-Key", rc.idempotencyKey)
	}
	if rc.waitSet {
		if rc.wait < 0 || rc.wait%time.Second != 0 {
			return nil, fmt.Errorf("switchyard: WithWait takes whole seconds, not %s", rc.wait)
		}
		header.Set("Prefer", "wait="+strconv.FormatInt(int64(rc.wait/time.Second), 10))
		// The gateway holds the answer for up to the wait: the request must outlast it.
		if !rc.timeoutSet && rc.timeout > 0 {
			rc.timeout += rc.wait
		}
	}
	if req.Input == nil {
		req.Input = map[string]any{}
	}
	body, err := c.call(ctx, rc, request{method: "POST", path: "/v1/jobs", json: req, header: header})
	if err != nil {
		return nil, err
	}
	return decodeJob(body)
}

// Get reads GET /v1/jobs/{run_id}.
func (c *Client) Get(ctx context.Context, runID string, opts ...RequestOption) (*Job, error) {
	cfg := c.config(opts)
	req := request{method: "GET", path: "/v1/jobs/" + escape(runID)}
	if len(cfg.include) > 0 {
		req.query = url.Values{"include": {strings.Join(cfg.include, ",")}}
	}
	body, err := c.call(ctx, cfg, req)
	if err != nil {
		return nil, err
	}
	return decodeJob(body)
}

// Cancel sends POST /v1/jobs/{run_id}/cancel and returns the job after it. A queued run is
// canceled at once; a running one ends canceled when its worker stops (follow it until
// Terminal). A run already over is an *APIError matching ErrAlreadyTerminal.
func (c *Client) Cancel(ctx context.Context, runID string, opts ...RequestOption) (*Job, error) {
	body, err := c.call(ctx, c.config(opts), request{method: "POST", path: "/v1/jobs/" + escape(runID) + "/cancel"})
	if err != nil {
		return nil, err
	}
	return decodeJob(body)
}

// List reads one page of GET /v1/jobs, newest first. Pass NextCursor back as Cursor until it
// is empty, or use Jobs to iterate over every page.
func (c *Client) List(ctx context.Context, params ListParams, opts ...RequestOption) (*JobPage, error) {
	q := url.Values{}
	if params.Status != "" {
		q.Set("status", string(params.Status))
	}
	if params.Kind != "" {
		q.Set("kind", params.Kind)
	}
	if params.BatchID != "" {
		q.Set("batch_id", params.BatchID)
	}
	if params.Limit != 0 {
		q.Set("limit", strconv.Itoa(params.Limit))
	}
	if params.Cursor != "" {
		q.Set("cursor", params.Cursor)
	}
	body, err := c.call(ctx, c.config(opts), request{method: "GET", path: "/v1/jobs", query: q})
	if err != nil {
		return nil, err
	}
	var raw struct {
		Data       []json.RawMessage `json:"data"`
		NextCursor *string           `json:"next_cursor"`
	}
	if err := decode(body, &raw); err != nil {
		return nil, err
	}
	page := &JobPage{Data: make([]*Job, 0, len(raw.Data))}
	for _, item := range raw.Data {
		job, err := decodeJob(item)
		if err != nil {
			return nil, err
		}
		page.Data = append(page.Data, job)
	}
	if raw.NextCursor != nil {
		page.NextCursor = *raw.NextCursor
	}
	return page, nil
}

// Jobs iterates over every job that params select, page after page (params.Limit is the
// page size), fetching the next page only when the current one is used up:
//
//	it := client.Jobs(params)
//	for it.Next(ctx) {
//		job := it.Job()
//	}
//	if err := it.Err(); err != nil { ... }
func (c *Client) Jobs(params ListParams, opts ...RequestOption) *JobIterator {
	return &JobIterator{c: c, params: params, opts: opts}
}

// JobIterator walks the pages of GET /v1/jobs; see Client.Jobs.
type JobIterator struct {
	c      *Client
	params ListParams
	opts   []RequestOption
	page   []*Job
	job    *Job
	pages  int
	last   bool
	err    error
}

// Next advances to the next job, fetching a page when needed; false at the end or on an
// error (see Err).
func (it *JobIterator) Next(ctx context.Context) bool {
	for len(it.page) == 0 {
		if it.err != nil || it.last {
			it.job = nil
			return false
		}
		page, err := it.c.List(ctx, it.params, it.opts...)
		if err != nil {
			it.err = err
			it.job = nil
			return false
		}
		it.pages++
		it.page = page.Data
		it.params.Cursor = page.NextCursor
		it.last = page.NextCursor == ""
	}
	it.job, it.page = it.page[0], it.page[1:]
	return true
}

// Job is the current job, after Next returned true.
func (it *JobIterator) Job() *Job { return it.job }

// Err is the error that ended the iteration, nil at a normal end.
func (it *JobIterator) Err() error { return it.err }

// Pages is how many pages have been fetched so far.
func (it *JobIterator) Pages() int { return it.pages }

// Cursor is the cursor of the next page to fetch ("" once the last page is in): keep it to
// go on later with ListParams.Cursor.
func (it *JobIterator) Cursor() string { return it.params.Cursor }

// Wait returns the run once it is terminal: by polling Get every opts.Interval, or, with
// opts.Events, by following its event stream until done. A network error, a request timeout,
// a 5xx or a 429 on the way is tried again (after Retry-After when longer). Past
// opts.Timeout it returns a *TimeoutError with RunID and LastJob; the run keeps going.
func (c *Client) Wait(ctx context.Context, runID string, opts WaitOptions) (*Job, error) {
	parent := ctx
	var cancel context.CancelFunc = func() {}
	if opts.Timeout > 0 {
		ctx, cancel = context.WithTimeout(ctx, opts.Timeout)
	}
	defer cancel()
	var reqOpts []RequestOption
	if opts.RequestTimeout > 0 {
		reqOpts = append(reqOpts, WithTimeout(opts.RequestTimeout))
	}
	var last *Job
	var err error
	if opts.Events {
		last, err = c.waitEvents(ctx, runID, opts, &last)
	} else {
		last, err = c.waitPolling(ctx, runID, opts, reqOpts, &last)
	}
	if err != nil && opts.Timeout > 0 && parent.Err() == nil && ctx.Err() != nil {
		return nil, &TimeoutError{Op: "wait " + runID, Timeout: opts.Timeout, RunID: runID, LastJob: last}
	}
	return last, err
}

func (c *Client) waitPolling(ctx context.Context, runID string, opts WaitOptions, reqOpts []RequestOption, last **Job) (*Job, error) {
	interval := opts.Interval
	if interval <= 0 {
		interval = DefaultPollInterval
	}
	for {
		pause := interval
		job, err := c.Get(ctx, runID, reqOpts...)
		if err == nil {
			*last = job
			if job.Terminal {
				return job, nil
			}
		} else {
			if ctx.Err() != nil || !transient(err) {
				return *last, err
			}
			var apiErr *APIError
			if errors.As(err, &apiErr) && apiErr.RetryAfter > pause {
				pause = apiErr.RetryAfter
			}
		}
		if err := sleep(ctx, pause); err != nil {
			return *last, err
		}
	}
}

func (c *Client) waitEvents(ctx context.Context, runID string, opts WaitOptions, last **Job) (*Job, error) {
	s := c.Stream(ctx, runID, StreamOptions{ConnectTimeout: opts.RequestTimeout})
	defer s.Close()
	for s.Next() {
		ev := s.Event()
		if ev.Job != nil {
			*last = ev.Job
			if ev.Event == EventDone {
				return ev.Job, nil
			}
		}
	}
	if err := s.Err(); err != nil {
		return *last, err
	}
	return *last, fmt.Errorf("switchyard: the event stream of %s ended without done", runID)
}

// transient is true for what is worth another try: the network, a timeout, 5xx and 429.
func transient(err error) bool {
	var apiErr *APIError
	if errors.As(err, &apiErr) {
		return apiErr.Retryable()
	}
	var netErr *NetworkError
	var timeoutErr *TimeoutError
	return errors.As(err, &netErr) || errors.As(err, &timeoutErr)
}

// sleep pauses for d, or less if ctx ends first (then its error).
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
