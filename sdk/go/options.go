package switchyard

import (
	"net/http"
	"time"
)

// DefaultTimeout bounds each request when the client is made without WithDefaultTimeout.
const DefaultTimeout = 30 * time.Second

// ClientOption configures a Client in NewClient.
type ClientOption func(*Client)

// WithAPIKey sets the account key, sent as "Authorization: Bearer <key>". Only Capacity
// works without one.
func WithAPIKey(key string) ClientOption {
	return func(c *Client) { c.apiKey = key }
}

// WithHTTPClient sets the http.Client the client sends with (proxies, TLS settings, tests).
// Its own Timeout, if set, also applies and would cut event streams: leave it zero and use
// WithDefaultTimeout, which bounds a stream's connection but not its length.
func WithHTTPClient(hc *http.Client) ClientOption {
	return func(c *Client) { c.http = hc }
}

// WithDefaultTimeout sets the timeout of each request, overridable per call with WithTimeout;
// 0 means none (the context alone bounds the call).
func WithDefaultTimeout(d time.Duration) ClientOption {
	return func(c *Client) { c.timeout = d }
}

// WithUserAgent sets the User-Agent header of every request.
func WithUserAgent(ua string) ClientOption {
	return func(c *Client) { c.userAgent = ua }
}

// RequestOption configures one call.
type RequestOption func(*requestConfig)

type requestConfig struct {
	timeout        time.Duration
	timeoutSet     bool
	idempotencyKey string
	wait           time.Duration
	waitSet        bool
	headers        http.Header
	include        []string
}

// WithTimeout bounds this call instead of the client's default; 0 means no timeout of its own.
// For an event stream it bounds each connection attempt up to the response headers, not the
// stream. When it fires the call returns a *TimeoutError; the context's own deadline or
// cancellation is returned as the context's error instead.
func WithTimeout(d time.Duration) RequestOption {
	return func(r *requestConfig) { r.timeout, r.timeoutSet = d, true }
}

// WithIdempotencyKey sends Idempotency-Key with a submission: the same key and body within
// 24 hours answer the first run again instead of creating a second one.
func WithIdempotencyKey(key string) RequestOption {
	return func(r *requestConfig) { r.idempotencyKey = key }
}

// WithWait sends "Prefer: wait=N" (whole seconds, 0 to 60) with a submission: the gateway
// holds its answer until the run ends or N seconds pass. Check Job.Terminal on the answer.
// Unless WithTimeout is given, the call's timeout is the client's default plus the wait.
func WithWait(d time.Duration) RequestOption {
	return func(r *requestConfig) { r.wait, r.waitSet = d, true }
}

// WithInclude asks Get for extra fields of the job object: "input" fills Job.Input with the
// input the run was given, which the job object otherwise leaves out (docs/api.md). Other calls
// ignore it.
func WithInclude(fields ...string) RequestOption {
	return func(r *requestConfig) { r.include = append(r.include, fields...) }
}

// WithHeader adds a header to this call's request (an X-Request-Id to trace it, say).
func WithHeader(name, value string) RequestOption {
	return func(r *requestConfig) {
		if r.headers == nil {
			r.headers = http.Header{}
		}
		r.headers.Add(name, value)
	}
}

func (c *Client) config(opts []RequestOption) *requestConfig {
	rc := &requestConfig{timeout: c.timeout}
	for _, o := range opts {
		o(rc)
	}
	return rc
}

// WaitOptions configures Client.Wait.
type WaitOptions struct {
	// Interval between polls of GET /v1/jobs/{run_id}; 0 means one second.
	Interval time.Duration
	// Timeout of the whole wait; 0 means none (the context alone bounds it). Past it, Wait
	// returns a *TimeoutError carrying the run id and the last state seen: the run itself
	// keeps going.
	Timeout time.Duration
	// RequestTimeout bounds each poll or stream connection; 0 means the client's default.
	RequestTimeout time.Duration
	// Events follows the run's event stream (SSE) instead of polling: no interval, and the
	// answer comes as soon as the run ends.
	Events bool
}

// StreamOptions configures Client.Stream.
type StreamOptions struct {
	// LastEventID resumes after this event id, as a reconnect would (0 replays the whole
	// log). Nil starts with the run's current status.
	LastEventID *int64
	// MaxReconnects is how many failed connections in a row are tried again before the
	// stream gives up with a *StreamError; 0 means 5, a negative value none.
	MaxReconnects int
	// ReconnectDelay is the pause before a reconnect; 0 means the server's "retry:" hint,
	// else one second. A Retry-After of a 429 or 503 is honoured when it is longer.
	ReconnectDelay time.Duration
	// ConnectTimeout bounds each connection attempt up to the response headers; 0 means the
	// client's default timeout.
	ConnectTimeout time.Duration
}
