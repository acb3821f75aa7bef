package switchyard

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

func collect(t *testing.T, s *EventStream) []Event {
	t.Helper()
	defer s.Close()
	var out []Event
	for s.Next() {
		out = append(out, s.Event())
	}
	if err := s.Err(); err != nil {
		t.Fatalf("stream after %d events: %v", len(out), err)
	}
	return out
}

func summary(events []Event) string {
	s := ""
	for _, e := range events {
		s += fmt.Sprintf("%d:%s:%s ", e.ID, e.Event, e.Data)
	}
	return s
}

// ids 1 apart: nothing missed, nothing repeated.
func assertConsecutive(t *testing.T, events []Event) {
	t.Helper()
	for i := 1; i < len(events); i++ {
		if events[i].ID != events[i-1].ID+1 {
			t.Fatalf("ids with a gap or a repeat: %s", summary(events))
		}
	}
}

func TestStreamFromStatusToDoneAndResume(t *testing.T) {
	g := needGateway(t)
	ctx := testCtx(t)
	c := newTestClient(t, g.url, g.key)
	run, err := c.Submit(ctx, SubmitRequest{Kind: "inference:image:generate", Input: map[string]any{"prompt": "streamed"}})
	if err != nil {
		t.Fatal(err)
	}
	events := collect(t, c.Stream(ctx, run.RunID, StreamOptions{}))
	if len(events) < 2 || events[0].Event != EventStatus || events[len(events)-1].Event != EventDone {
		t.Fatalf("events: %s", summary(events))
	}
	assertConsecutive(t, events)
	progress := 0
	for _, e := range events {
		if e.Event == EventProgress {
			progress++
			if e.Progress == nil || e.Progress.Progress < 0 || e.Progress.Progress > 1 {
				t.Fatalf("progress: %s", e.Data)
			}
		}
	}
	if progress < 3 {
		t.Fatalf("progress events: %s", summary(events))
	}
	done := events[len(events)-1].Job
	if done == nil || !done.Terminal || done.Status != StatusSucceeded || len(done.Output.URLs) == 0 {
		t.Fatalf("done: %s", events[len(events)-1].Data)
	}

	// Resuming after an id gives exactly the events after it.
	from := events[1].ID
	resumed := collect(t, c.Stream(ctx, run.RunID, StreamOptions{LastEventID: &from}))
	if summary(resumed) != summary(events[2:]) {
		t.Fatalf("resumed after %d:\n%s\nwant:\n%s", from, summary(resumed), summary(events[2:]))
	}

	// A run already over: status, done, the end.
	late := collect(t, c.Stream(ctx, run.RunID, StreamOptions{}))
	if len(late) != 2 || late[0].Event != EventStatus || late[1].Event != EventDone {
		t.Fatalf("late: %s", summary(late))
	}

	// The channel form gives the same events.
	s := c.Stream(ctx, run.RunID, StreamOptions{LastEventID: &from})
	var viaChannel []Event
	for ev := range s.Channel() {
		viaChannel = append(viaChannel, ev)
	}
	if s.Err() != nil || summary(viaChannel) != summary(resumed) {
		t.Fatalf("channel: %v %s", s.Err(), summary(viaChannel))
	}
}

// The proxy cuts the first events connection of a run in the middle of its first progress
// frame; the stream reconnects with Last-Event-ID and nothing is missed or repeated.
func TestStreamResumesAfterTheConnectionIsCut(t *testing.T) {
	g := needGateway(t)
	if g.proxyURL == "" {
		t.Skipf("no cutting proxy: set %s", envProxyURL)
	}
	ctx := testCtx(t)
	c := newTestClient(t, g.url, g.key)
	proxied := newTestClient(t, g.proxyURL, g.key)
	run, err := c.Submit(ctx, SubmitRequest{Kind: "inference:image:generate", Input: map[string]any{"prompt": "cut me"}})
	if err != nil {
		t.Fatal(err)
	}
	s := proxied.Stream(ctx, run.RunID, StreamOptions{ReconnectDelay: 10 * time.Millisecond})
	events := collect(t, s)
	if s.Connections() < 2 {
		t.Fatalf("the stream was not cut (one connection): %s", summary(events))
	}
	if events[0].Event != EventStatus || events[len(events)-1].Event != EventDone {
		t.Fatalf("events: %s", summary(events))
	}
	assertConsecutive(t, events)
	// What the cut stream delivered equals an uncut replay of the log after its first event.
	first := events[0].ID
	replay := collect(t, c.Stream(ctx, run.RunID, StreamOptions{LastEventID: &first}))
	if summary(events[1:]) != summary(replay) {
		t.Fatalf("after the cut:\n%s\nthe log:\n%s", summary(events[1:]), summary(replay))
	}
	hasProgress := false
	for _, e := range events {
		hasProgress = hasProgress || e.Event == EventProgress
	}
	if !hasProgress {
		t.Fatalf("the progress frame that was cut never arrived: %s", summary(events))
	}

	// Wait by events goes through the same resume.
	run2, err := c.Submit(ctx, SubmitRequest{Kind: "inference:image:generate", Input: map[string]any{"prompt": "cut me too"}})
	if err != nil {
		t.Fatal(err)
	}
	job, err := proxied.Wait(ctx, run2.RunID, WaitOptions{Events: true, Timeout: 30 * time.Second})
	if err != nil || job.Status != StatusSucceeded || !job.Terminal {
		t.Fatalf("wait through the cut: %v %v", job, err)
	}
}

func TestStreamRefusals(t *testing.T) {
	g := needGateway(t)
	ctx := testCtx(t)
	c := newTestClient(t, g.url, g.key)
	s := c.Stream(ctx, missingRun, StreamOptions{})
	if s.Next() {
		t.Fatal("an event of a run that does not exist")
	}
	if !errors.Is(s.Err(), ErrNotFound) || s.Connections() != 1 {
		t.Fatalf("a 404 ends the stream at once: %v after %d connections", s.Err(), s.Connections())
	}
}

// Repeated 5xx: the first try and MaxReconnects more, each with Last-Event-ID, then a
// *StreamError to resume from.
func TestStreamGivesUpAfterMaxReconnects(t *testing.T) {
	var seen []http.Header
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = append(seen, r.Header.Clone())
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(503)
		_, _ = w.Write([]byte(`{"error":{"code":"unavailable","message":"down"}}`))
	}))
	defer srv.Close()
	c := newTestClient(t, srv.URL, "k")
	last := int64(4)
	s := c.Stream(testCtx(t), missingRun, StreamOptions{MaxReconnects: 2, ReconnectDelay: time.Millisecond, LastEventID: &last})
	if s.Next() {
		t.Fatal("an event from a failing server")
	}
	var se *StreamError
	if !errors.As(s.Err(), &se) || !errors.Is(s.Err(), ErrUnavailable) {
		t.Fatalf("want a *StreamError wrapping unavailable, got %T %v", s.Err(), s.Err())
	}
	if se.RunID != missingRun || se.LastEventID == nil || *se.LastEventID != 4 || se.Attempts != 3 || len(seen) != 3 {
		t.Fatalf("%+v after %d requests", se, len(seen))
	}
	for _, h := range seen {
		if h.Get("Last-Event-ID") != "4" || h.Get("Accept") != "text/event-stream" || h.Get("Authorization") != "Bearer k" {
			t.Fatalf("headers: %v", h)
		}
	}
}

// A frame cut before its blank line is never delivered, and ids already delivered are
// skipped when the server sends them again.
func TestStreamParserSkipsPartialFramesAndRepeats(t *testing.T) {
	calls := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls++
		w.Header().Set("Content-Type", "text/event-stream")
		if calls == 1 {
			_, _ = w.Write([]byte("retry: 1\n\n: ping\n\nid: 1\nevent: status\ndata: {\"run_id\":\"run_x\",\"status\":\"running\"}\n\nid: 2\r\nevent: progress\r\ndata: {\"progress\":0.5}\r\n\r\nid: 3\nevent: log\ndata: {\"line\":\"cut"))
			return
		}
		if r.Header.Get("Last-Event-ID") != "2" {
			t.Errorf("resumed with Last-Event-ID %q", r.Header.Get("Last-Event-ID"))
		}
		_, _ = w.Write([]byte("id: 2\nevent: progress\ndata: {\"progress\":0.5}\n\nid: 3\nevent: log\ndata: {\"line\":\"whole\",\"ts\":\"t\"}\n\nid: 4\nevent: mystery\ndata: {}\n\nid: 5\nevent: done\ndata: {\"run_id\":\"run_x\",\"status\":\"succeeded\"}\n\n"))
	}))
	defer srv.Close()
	c := newTestClient(t, srv.URL, "k")
	events := collect(t, c.Stream(testCtx(t), "run_x", StreamOptions{}))
	if got := summary(events); got != `1:status:{"run_id":"run_x","status":"running"} 2:progress:{"progress":0.5} 3:log:{"line":"whole","ts":"t"} 5:done:{"run_id":"run_x","status":"succeeded"} ` {
		t.Fatalf("events: %s", got)
	}
	if events[2].Log == nil || events[2].Log.Line != "whole" || !events[3].Job.Terminal {
		t.Fatalf("typed data: %+v %+v", events[2].Log, events[3].Job)
	}
}

// A consumer of the channel that leaves early closes the stream: the channel closes, the
// connection is released and Err stays nil.
func TestStreamChannelClosedEarly(t *testing.T) {
	released := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write([]byte("id: 1\nevent: status\ndata: {\"run_id\":\"run_x\",\"status\":\"running\"}\n\nid: 2\nevent: progress\ndata: {\"progress\":0.1}\n\n"))
		w.(http.Flusher).Flush()
		<-r.Context().Done()
		close(released)
	}))
	defer srv.Close()
	c := newTestClient(t, srv.URL, "k")
	s := c.Stream(testCtx(t), "run_x", StreamOptions{})
	ch := s.Channel()
	first := <-ch
	if first.Event != EventStatus || first.Job == nil || first.Job.Status != StatusRunning {
		t.Fatalf("first: %v", first)
	}
	s.Close()
	for range ch {
		// drains what was in flight; the channel must close
	}
	select {
	case <-released:
	case <-time.After(10 * time.Second):
		t.Fatal("the connection was not released after Close")
	}
	if s.Err() != nil {
		t.Fatalf("Close is not an error: %v", s.Err())
	}
}
