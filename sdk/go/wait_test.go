package switchyard

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"regexp"
	"testing"
	"time"
)

// Wait past its own timeout: a *TimeoutError naming the run and its last state, and the run
// is untouched.
func TestWaitTimeout(t *testing.T) {
	g := needGateway(t)
	ctx := testCtx(t)
	c := newTestClient(t, g.url, g.key)
	run, err := c.Submit(ctx, SubmitRequest{Kind: "inference:image:generate", Input: map[string]any{"prompt": "waits forever"}, Confidentiality: stuck})
	if err != nil {
		t.Fatal(err)
	}
	cancelLater(t, c, run.RunID)
	for _, events := range []bool{false, true} {
		_, err = c.Wait(ctx, run.RunID, WaitOptions{Interval: 20 * time.Millisecond, Timeout: 300 * time.Millisecond, Events: events})
		var te *TimeoutError
		if !errors.As(err, &te) || !errors.Is(err, ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("events %v: want a *TimeoutError, got %T %v", events, err, err)
		}
		if te.RunID != run.RunID || te.Timeout != 300*time.Millisecond || te.LastJob == nil || te.LastJob.Status != StatusQueued {
			t.Fatalf("events %v: %+v", events, te)
		}
		if !regexp.MustCompile(run.RunID).MatchString(te.Error()) {
			t.Fatalf("the message names the run: %s", te.Error())
		}
	}
	still, err := c.Get(ctx, run.RunID)
	if err != nil || still.Status != StatusQueued {
		t.Fatalf("the run itself: %v %v", still, err)
	}
}

// Wait polls through what is worth another try (a 503, a 429) and stops at the terminal job;
// a refusal that is not (a 404) ends it at once.
func TestWaitPollsThroughTransientErrors(t *testing.T) {
	answers := []struct {
		status int
		body   string
	}{
		{503, `{"error":{"code":"unavailable","message":"restarting"}}`},
		{429, `{"error":{"code":"rate_limited","message":"slow down"}}`},
		{200, `{"run_id":"run_x","status":"running","terminal":false}`},
		{200, `{"run_id":"run_x","status":"succeeded","terminal":true,"output":{"urls":["u"],"files":[]}}`},
		{404, `{"error":{"code":"not_found","message":"run not found"}}`},
	}
	calls := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a := answers[calls]
		calls++
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(a.status)
		_, _ = w.Write([]byte(a.body))
	}))
	defer srv.Close()
	c := newTestClient(t, srv.URL, "k")
	job, err := c.Wait(testCtx(t), "run_x", WaitOptions{Interval: time.Millisecond})
	if err != nil || job.Status != StatusSucceeded || !job.Terminal || job.Output.URLs[0] != "u" || calls != 4 {
		t.Fatalf("after %d polls: %+v %v", calls, job, err)
	}
	if _, err := c.Wait(testCtx(t), "run_x", WaitOptions{Interval: time.Millisecond}); !errors.Is(err, ErrNotFound) || calls != 5 {
		t.Fatalf("a 404 is not tried again: %v after %d", err, calls)
	}
}
