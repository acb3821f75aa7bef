// Package switchyard is a client of the Switchyard job gateway's HTTP API: submit jobs, read,
// list, cancel and wait for them, follow their events over server-sent events with automatic
// resume, upload files, and read the fleet's capabilities and capacity.
//
// Every call takes a context.Context and returns typed errors: *APIError for the gateway's
// error answers (matching the Err* sentinel of its code with errors.Is), *TimeoutError,
// *NetworkError and *StreamError. Only the standard library is used.
package switchyard

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"
)

// Client talks to one gateway as one account. It is safe for concurrent use.
type Client struct {
	base      *url.URL
	apiKey    string
	http      *http.Client
	timeout   time.Duration
	userAgent string
	// Files is the Files API (docs/files.md).
	Files *FilesService
}

// NewClient makes a client of the gateway at baseURL (e.g. "https://switchyard.example"; a
// path prefix is kept).
func NewClient(baseURL string, opts ...ClientOption) (*Client, error) {
	u, err := url.Parse(baseURL)
	if err != nil {
		return nil, fmt.Errorf("switchyard: base URL: %w", err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("switchyard: base URL must be http(s) with a host, not %q", baseURL)
	}
	if !strings.HasSuffix(u.Path, "/") {
		u.Path += "/"
	}
	u.RawQuery, u.Fragment = "", ""
	c := &Client{base: u, http: http.DefaultClient, timeout: DefaultTimeout, userAgent: "switchyard-go"}
	for _, o := range opts {
		o(c)
	}
	c.Files = &FilesService{c: c}
	return c, nil
}

// BaseURL is the gateway's URL as the client uses it.
func (c *Client) BaseURL() string { return c.base.String() }

// Capabilities reads GET /v1/capabilities: every kind, its input schema, its outputs and the
// workers serving it now.
func (c *Client) Capabilities(ctx context.Context, opts ...RequestOption) (*Capabilities, error) {
	body, err := c.call(ctx, c.config(opts), request{method: "GET", path: "/v1/capabilities"})
	if err != nil {
		return nil, err
	}
	var caps Capabilities
	if err := decode(body, &caps); err != nil {
		return nil, err
	}
	caps.Raw = body
	return &caps, nil
}

// Capacity reads GET /v1/network/capacity, the live fleet's capacity (no key needed).
func (c *Client) Capacity(ctx context.Context, opts ...RequestOption) (*Capacity, error) {
	body, err := c.call(ctx, c.config(opts), request{method: "GET", path: "/v1/network/capacity"})
	if err != nil {
		return nil, err
	}
	var capacity Capacity
	if err := decode(body, &capacity); err != nil {
		return nil, err
	}
	capacity.Raw = body
	return &capacity, nil
}

type request struct {
	method string
	path   string
	query  url.Values
	// json is marshalled as the body when not nil.
	json any
	// body is sent as it is, with contentType and, when >= 0, contentLength.
	body          io.Reader
	contentType   string
	contentLength int64
	header        http.Header
}

func (r request) op() string { return r.method + " " + r.path }

// deadline cancels a call's context on the caller's context or on its own timer, and
// remembers which, so a timeout is told apart from the caller's own cancellation.
type deadline struct {
	ctx     context.Context
	cancel  context.CancelFunc
	timer   *time.Timer
	timeout time.Duration
	fired   int32
}

func newDeadline(parent context.Context, timeout time.Duration) *deadline {
	ctx, cancel := context.WithCancel(parent)
	d := &deadline{ctx: ctx, cancel: cancel, timeout: timeout}
	if timeout > 0 {
		d.timer = time.AfterFunc(timeout, func() {
			atomic.StoreInt32(&d.fired, 1)
			cancel()
		})
	}
	return d
}

// stopTimer keeps the caller's context but drops the timer: a stream that has connected
// may run for as long as its run does.
func (d *deadline) stopTimer() {
	if d.timer != nil {
		d.timer.Stop()
	}
}

func (d *deadline) timedOut() bool { return atomic.LoadInt32(&d.fired) == 1 }

func (d *deadline) done() {
	d.stopTimer()
	d.cancel()
}

// failure says what an error of the transport means: our timeout, the caller's
// cancellation (returned as the context's own error), or the network.
func (d *deadline) failure(parent context.Context, op string, err error) error {
	var apiErr *APIError
	if errors.As(err, &apiErr) {
		return err
	}
	if d.timedOut() {
		return &TimeoutError{Op: op, Timeout: d.timeout}
	}
	if parent.Err() != nil {
		return parent.Err()
	}
	return &NetworkError{Op: op, Err: err}
}

// send sends a request under dl and returns the response once its headers are in, the body
// unread; an error status is read whole and returned as an *APIError.
func (c *Client) send(parent context.Context, dl *deadline, r request) (*http.Response, error) {
	// r.path is already escaped (see escape), so it is joined as text, not set as url.Path.
	target := c.base.String() + strings.TrimPrefix(r.path, "/")
	if len(r.query) > 0 {
		target += "?" + r.query.Encode()
	}
	var body io.Reader
	contentType := r.contentType
	contentLength := int64(-1)
	if r.json != nil {
		b, err := json.Marshal(r.json)
		if err != nil {
			return nil, fmt.Errorf("switchyard: %s: encoding the body: %w", r.op(), err)
		}
		body, contentType, contentLength = bytes.NewReader(b), "application/json", int64(len(b))
	} else if r.body != nil {
		body, contentLength = r.body, r.contentLength
	}
	req, err := http.NewRequestWithContext(dl.ctx, r.method, target, body)
	if err != nil {
		return nil, fmt.Errorf("switchyard: %s: %w", r.op(), err)
	}
	if body != nil && contentLength >= 0 {
		req.ContentLength = contentLength
	}
	req.Header.Set("Accept", "application/json")
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if c.apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.apiKey)
	}
	if c.userAgent != "" {
		req.Header.Set("User-Agent", c.userAgent)
	}
	for name, values := range r.header {
		req.Header.Del(name)
		for _, v := range values {
			req.Header.Add(name, v)
		}
	}
	res, err := c.http.Do(req)
	if err != nil {
		return nil, dl.failure(parent, r.op(), err)
	}
	if res.StatusCode >= 200 && res.StatusCode < 300 {
		return res, nil
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return nil, dl.failure(parent, r.op(), err)
	}
	return nil, apiErrorFrom(res, b)
}

// call sends a request and reads its whole answer under the call's timeout.
func (c *Client) call(parent context.Context, rc *requestConfig, r request) ([]byte, error) {
	b, _, err := c.callFull(parent, rc, r)
	return b, err
}

func (c *Client) callFull(parent context.Context, rc *requestConfig, r request) ([]byte, *http.Response, error) {
	if rc.headers != nil {
		if r.header == nil {
			r.header = http.Header{}
		}
		for name, values := range rc.headers {
			r.header[name] = append(r.header[name], values...)
		}
	}
	dl := newDeadline(parent, rc.timeout)
	defer dl.done()
	res, err := c.send(parent, dl, r)
	if err != nil {
		return nil, nil, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return nil, nil, dl.failure(parent, r.op(), err)
	}
	return b, res, nil
}

// decode reads a JSON answer; a body that is not the expected JSON is an invalid_response.
func decode(b []byte, v any) error {
	if err := json.Unmarshal(b, v); err != nil {
		return &APIError{Status: 200, Code: CodeInvalidResponse, Message: "the answer is not the expected JSON: " + err.Error(), Body: b}
	}
	return nil
}

// escape makes an id one path segment, whatever it holds.
func escape(id string) string { return url.PathEscape(id) }
