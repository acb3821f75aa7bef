package switchyard

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// silentServer accepts requests and never answers until the test ends.
func silentServer(t *testing.T) string {
	t.Helper()
	stop := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-stop:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(func() {
		close(stop)
		srv.Close()
	})
	return srv.URL
}

func TestRequestTimeouts(t *testing.T) {
	url := silentServer(t)
	c := newTestClient(t, url, "k", WithDefaultTimeout(100*time.Millisecond))
	_, err := c.Get(context.Background(), missingRun)
	var te *TimeoutError
	if !errors.As(err, &te) || te.Timeout != 100*time.Millisecond || te.RunID != "" || !errors.Is(err, ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("the client's default: %T %v", err, err)
	}

	none := newTestClient(t, url, "k", WithDefaultTimeout(0))
	_, err = none.Capabilities(context.Background(), WithTimeout(50*time.Millisecond))
	if !errors.As(err, &te) || te.Timeout != 50*time.Millisecond {
		t.Fatalf("a per-call timeout: %T %v", err, err)
	}

	// The wait of a submission is added to the default timeout: the call outlasts it.
	_, err = c.Submit(context.Background(), SubmitRequest{Kind: "k", Input: map[string]any{}}, WithWait(time.Second))
	if !errors.As(err, &te) || te.Timeout != 1100*time.Millisecond {
		t.Fatalf("submit with wait: %T %v", err, err)
	}

	// An event stream's timeout bounds its connection, and then the reconnects give up.
	s := c.Stream(context.Background(), missingRun, StreamOptions{MaxReconnects: -1})
	if s.Next() || !errors.As(s.Err(), &te) {
		t.Fatalf("a stream that never connects: %T %v", s.Err(), s.Err())
	}
}

// The caller's own cancellation or deadline is the context's error, not a *TimeoutError.
func TestCallerContextIsNotATimeout(t *testing.T) {
	url := silentServer(t)
	c := newTestClient(t, url, "k")
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		time.Sleep(20 * time.Millisecond)
		cancel()
	}()
	_, err := c.Get(ctx, missingRun)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled: %T %v", err, err)
	}
	var te *TimeoutError
	if errors.As(err, &te) {
		t.Fatal("a caller's cancel is not a timeout")
	}

	ctx, cancel2 := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel2()
	_, err = c.Get(ctx, missingRun)
	if err != context.DeadlineExceeded {
		t.Fatalf("the caller's deadline: %T %v", err, err)
	}

	// Close stops a stream that waits for events, from another goroutine, without an error.
	s := c.Stream(context.Background(), missingRun, StreamOptions{})
	go func() {
		time.Sleep(20 * time.Millisecond)
		s.Close()
	}()
	if s.Next() || s.Err() != nil {
		t.Fatalf("after Close: %v", s.Err())
	}
}

func TestNetworkError(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	c := newTestClient(t, "http://"+addr, "k")
	_, err = c.Get(context.Background(), missingRun)
	var ne *NetworkError
	if !errors.As(err, &ne) || ne.Op != "GET /v1/jobs/"+missingRun {
		t.Fatalf("a refused connection: %T %v", err, err)
	}
	if !transient(err) {
		t.Fatal("a network error is worth another try")
	}
}

// Timeouts against the real gateway: a per-call timeout too short for a held submission.
func TestGatewayTimeout(t *testing.T) {
	g := needGateway(t)
	ctx := testCtx(t)
	c := newTestClient(t, g.url, g.key)
	_, err := c.Submit(ctx, SubmitRequest{Kind: "inference:image:generate", Input: map[string]any{"prompt": "held"}, Confidentiality: stuck}, WithWait(5*time.Second), WithTimeout(200*time.Millisecond), WithHeader("X-Request-Id", "go-timeout-test"))
	var te *TimeoutError
	if !errors.As(err, &te) || te.Timeout != 200*time.Millisecond {
		t.Fatalf("want a *TimeoutError, got %T %v", err, err)
	}
	// The run was accepted before the timeout fired; it is found and canceled.
	it := c.Jobs(ListParams{Kind: "inference:image:generate", Status: StatusQueued})
	for it.Next(ctx) {
		if it.Job().Confidentiality == stuck {
			_, _ = c.Cancel(ctx, it.Job().RunID)
		}
	}
}
