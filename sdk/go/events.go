package switchyard

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

const (
	defaultMaxReconnects  = 5
	defaultReconnectDelay = time.Second
)

// Stream follows GET /v1/jobs/{run_id}/events. The stream connects on the first Next; a
// dropped connection, a 5xx or 429, or a connect timeout is followed by a reconnect that
// sends Last-Event-ID, so events arrive in order with none missed or repeated (ids already
// delivered are skipped). It ends after the done event. A 4xx other than 429 ends it at once
// with the *APIError; ctx ends it too. Close it when leaving early.
//
//	s := client.Stream(ctx, runID, switchyard.StreamOptions{})
//	defer s.Close()
//	for s.Next() {
//		ev := s.Event()
//	}
//	if err := s.Err(); err != nil { ... }
func (c *Client) Stream(ctx context.Context, runID string, opts StreamOptions) *EventStream {
	inner, cancel := context.WithCancel(ctx)
	s := &EventStream{c: c, parent: ctx, ctx: inner, cancel: cancel, closedCh: make(chan struct{}), runID: runID, opts: opts, path: "/v1/jobs/" + escape(runID) + "/events"}
	if opts.LastEventID != nil {
		v := *opts.LastEventID
		s.last = &v
	}
	return s
}

// EventStream is a run's event stream; see Client.Stream. Its methods are not safe for
// concurrent use, except Close.
type EventStream struct {
	c      *Client
	parent context.Context
	ctx    context.Context
	cancel context.CancelFunc
	runID  string
	opts   StreamOptions
	// path is the stream's route: a run's events, or a batch's (StreamBatch).
	path string

	last        *int64
	serverRetry time.Duration
	conn        *connection
	failures    int
	event       Event
	finished    bool
	err         error
	closeOnce   sync.Once
	closed      int32
	closedCh    chan struct{}
	// Connections counts connection attempts, for callers that watch reconnects.
	connections int
}

// connection is one open response of the events route.
type connection struct {
	body   io.ReadCloser
	reader *bufio.Reader
	dl     *deadline
}

// RunID is the run this stream follows.
func (s *EventStream) RunID() string { return s.runID }

// LastEventID is the id of the last event delivered (nil before the first): pass it as
// StreamOptions.LastEventID to resume later.
func (s *EventStream) LastEventID() *int64 {
	if s.last == nil {
		return nil
	}
	v := *s.last
	return &v
}

// Connections is how many connections the stream has opened, reconnects included.
func (s *EventStream) Connections() int { return s.connections }

// Event is the current event, after Next returned true.
func (s *EventStream) Event() Event { return s.event }

// Err is the error that ended the stream: nil after done or Close, the context's error when
// it ended the stream, an *APIError for a refusal, a *StreamError after too many failures.
func (s *EventStream) Err() error { return s.err }

// Close ends the stream and its connection. Safe to call more than once and from another
// goroutine (to stop a Next that is waiting).
func (s *EventStream) Close() error {
	s.closeOnce.Do(func() {
		atomic.StoreInt32(&s.closed, 1)
		close(s.closedCh)
		s.cancel()
	})
	return nil
}

// Channel delivers the stream's events on a channel, closed when the stream ends; then read
// Err. The stream must not be used otherwise meanwhile; Close (or the context) stops it.
func (s *EventStream) Channel() <-chan Event {
	ch := make(chan Event)
	go func() {
		defer close(ch)
		for s.Next() {
			// Not s.ctx: it is also canceled once done arrives, and done must still be delivered.
			select {
			case ch <- s.event:
			case <-s.closedCh:
				s.end(nil)
				return
			case <-s.parent.Done():
				s.end(s.parent.Err())
				return
			}
		}
	}()
	return ch
}

// Next waits for the next event; false when the stream has ended (see Err).
func (s *EventStream) Next() bool {
	if s.finished {
		return false
	}
	maxReconnects := s.opts.MaxReconnects
	if maxReconnects == 0 {
		maxReconnects = defaultMaxReconnects
	} else if maxReconnects < 0 {
		maxReconnects = 0
	}
	for {
		if s.ctx.Err() != nil {
			return s.end(s.ctxErr())
		}
		var failure error
		if s.conn == nil {
			failure = s.connect()
		}
		if failure == nil {
			ev, ok, err := s.read()
			if ok {
				s.failures = 0
				s.event = ev
				if ev.Event == EventDone {
					// Nothing follows done: release the connection and the context now.
					s.closeConn()
					s.finished = true
					s.cancel()
				}
				return true
			}
			failure = err
		}
		s.closeConn()
		if s.ctx.Err() != nil {
			return s.end(s.ctxErr())
		}
		var apiErr *APIError
		if errors.As(failure, &apiErr) && !apiErr.Retryable() {
			return s.end(failure)
		}
		s.failures++
		if s.failures > maxReconnects {
			return s.end(&StreamError{RunID: s.runID, LastEventID: s.LastEventID(), Attempts: s.failures, Err: failure})
		}
		pause := s.opts.ReconnectDelay
		if pause <= 0 {
			pause = s.serverRetry
		}
		if pause <= 0 {
			pause = defaultReconnectDelay
		}
		if apiErr != nil && apiErr.RetryAfter > pause {
			pause = apiErr.RetryAfter
		}
		if err := sleep(s.ctx, pause); err != nil {
			return s.end(s.ctxErr())
		}
	}
}

// ctxErr is nil when Close ended the stream, else the caller's context's error.
func (s *EventStream) ctxErr() error {
	if atomic.LoadInt32(&s.closed) == 1 {
		return nil
	}
	if err := s.parent.Err(); err != nil {
		return err
	}
	return s.ctx.Err()
}

func (s *EventStream) end(err error) bool {
	s.closeConn()
	s.finished = true
	s.err = err
	s.cancel()
	return false
}

func (s *EventStream) connect() error {
	s.connections++
	header := http.Header{}
	header.Set("Accept", "text/event-stream")
	header.Set("Cache-Control", "no-cache")
	if s.last != nil {
		header.Set("Last-Event-ID", strconv.FormatInt(*s.last, 10))
	}
	timeout := s.opts.ConnectTimeout
	if timeout <= 0 {
		timeout = s.c.timeout
	}
	r := request{method: "GET", path: s.path, header: header}
	dl := newDeadline(s.ctx, timeout)
	res, err := s.c.send(s.ctx, dl, r)
	if err != nil {
		dl.done()
		return err
	}
	// The timeout bounds the wait for the headers only, never the stream itself.
	dl.stopTimer()
	if ct := res.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		b, _ := io.ReadAll(io.LimitReader(res.Body, 64<<10))
		res.Body.Close()
		dl.done()
		return &APIError{Status: res.StatusCode, Code: CodeInvalidResponse, Message: fmt.Sprintf("%s answered %q, not text/event-stream", r.op(), ct), RequestID: res.Header.Get("X-Request-Id"), Body: b}
	}
	s.conn = &connection{body: res.Body, reader: bufio.NewReader(res.Body), dl: dl}
	return nil
}

func (s *EventStream) closeConn() {
	if s.conn != nil {
		s.conn.dl.done()
		s.conn.body.Close()
		s.conn = nil
	}
}

// read parses frames until one yields a new event of a known name. A frame is dispatched
// only at its blank line, so one cut short by a dropped connection is never delivered: the
// reconnect asks for it again.
func (s *EventStream) read() (Event, bool, error) {
	var id, name string
	var data []string
	hasID := false
	for {
		line, err := s.conn.reader.ReadString('\n')
		if err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return Event{}, false, s.conn.dl.failure(s.ctx, "GET "+s.path, fmt.Errorf("the stream ended before done: %w", err))
		}
		line = strings.TrimRight(line, "\r\n")
		if line == "" {
			if ev, ok := s.accept(hasID, id, name, data); ok {
				return ev, true, nil
			}
			id, name, data, hasID = "", "", nil, false
			continue
		}
		if strings.HasPrefix(line, ":") {
			continue
		}
		field, value := line, ""
		if i := strings.IndexByte(line, ':'); i >= 0 {
			field, value = line[:i], strings.TrimPrefix(line[i+1:], " ")
		}
		switch field {
		case "id":
			id, hasID = value, true
		case "event":
			name = value
		case "data":
			data = append(data, value)
		case "retry":
			if ms, err := strconv.Atoi(value); err == nil && ms >= 0 {
				s.serverRetry = time.Duration(ms) * time.Millisecond
			}
		}
	}
}

// accept turns a complete frame into an event, or skips it: an id already delivered, a
// name this client does not know, or a frame with nothing in it.
func (s *EventStream) accept(hasID bool, id, name string, data []string) (Event, bool) {
	if !hasID && name == "" && data == nil {
		return Event{}, false
	}
	var n int64
	if hasID {
		v, err := strconv.ParseInt(id, 10, 64)
		if err == nil {
			if s.last != nil && v <= *s.last {
				return Event{}, false
			}
			n = v
			s.last = &v
		}
	}
	switch name {
	case EventStatus, EventProgress, EventLog, EventOutput, EventDone:
	default:
		return Event{}, false
	}
	ev := Event{ID: n, Event: name, Data: json.RawMessage(strings.Join(data, "\n"))}
	switch name {
	case EventStatus, EventDone:
		if job, err := decodeJob(ev.Data); err == nil {
			ev.Job = job
		}
	case EventProgress:
		var p ProgressData
		if json.Unmarshal(ev.Data, &p) == nil {
			ev.Progress = &p
		}
	case EventLog:
		var l LogData
		if json.Unmarshal(ev.Data, &l) == nil {
			ev.Log = &l
		}
	case EventOutput:
		var o OutputData
		if json.Unmarshal(ev.Data, &o) == nil {
			ev.Output = &o
		}
	}
	return ev, true
}
