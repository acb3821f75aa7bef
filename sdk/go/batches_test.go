package switchyard

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

func TestBatchSubmitStreamListAndReplay(t *testing.T) {
	g := needGateway(t)
	ctx := testCtx(t)
	c := newTestClient(t, g.url, g.key)
	var jobs []SubmitRequest
	for i := 0; i < 4; i++ {
		jobs = append(jobs, SubmitRequest{Kind: "inference:image:generate", Input: map[string]any{"prompt": fmt.Sprintf("chair %d", i), "width": 64, "height": 64}})
	}
	key := fmt.Sprintf("go-batch-%d", time.Now().UnixNano())
	b, err := c.SubmitBatch(ctx, jobs, WithIdempotencyKey(key))
	if err != nil {
		t.Fatal(err)
	}
	if b.Size != 4 || len(b.Jobs) != 4 || b.Replayed {
		t.Fatalf("submitted: %s", b.Raw)
	}
	ended := map[string]bool{}
	var done *Batch
	s := c.StreamBatch(ctx, b.BatchID, StreamOptions{})
	defer s.Close()
	for s.Next() {
		ev := s.Event()
		if ev.Event == EventStatus && ev.Job != nil && ev.Job.Terminal {
			if ev.Job.BatchID == nil || *ev.Job.BatchID != b.BatchID {
				t.Fatalf("a job without its batch: %s", ev.Data)
			}
			ended[ev.Job.RunID] = true
		}
		if ev.Event == EventDone {
			if done, err = DecodeBatch(ev.Data); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	if done == nil || !done.Terminal || done.Counts[StatusSucceeded] != 4 || len(ended) != 4 {
		t.Fatalf("done %+v, ended %v", done, ended)
	}
	it := c.Jobs(ListParams{BatchID: b.BatchID, Limit: 3})
	listed := 0
	for it.Next(ctx) {
		if !ended[it.Job().RunID] {
			t.Fatalf("listed a job not of the batch: %s", it.Job().Raw)
		}
		listed++
	}
	if it.Err() != nil || listed != 4 {
		t.Fatalf("listed %d: %v", listed, it.Err())
	}
	again, err := c.SubmitBatch(ctx, jobs, WithIdempotencyKey(key))
	if err != nil || !again.Replayed || again.BatchID != b.BatchID {
		t.Fatalf("replay: %v %+v", err, again)
	}
	if _, err := c.SubmitBatch(ctx, jobs[:1], WithIdempotencyKey(key)); !errors.Is(err, ErrIdempotencyConflict) {
		t.Fatalf("another body under the key: %v", err)
	}
}

func TestBatchCancelAndRefusals(t *testing.T) {
	g := needGateway(t)
	ctx := testCtx(t)
	c := newTestClient(t, g.url, g.key)
	stuckJob := SubmitRequest{Kind: "inference:image:generate", Input: map[string]any{"prompt": "x"}, Confidentiality: stuck}
	b, err := c.SubmitBatch(ctx, []SubmitRequest{stuckJob, stuckJob, stuckJob})
	if err != nil {
		t.Fatal(err)
	}
	canceled, err := c.CancelBatch(ctx, b.BatchID)
	if err != nil || canceled.Canceled != 3 || canceled.CancelRequested != 0 || canceled.AlreadyTerminal != 0 {
		t.Fatalf("cancel: %v %+v", err, canceled)
	}
	got, err := c.GetBatch(ctx, b.BatchID)
	if err != nil || got.Counts[StatusCanceled] != 3 || !got.Terminal {
		t.Fatalf("get: %v %+v", err, got)
	}
	_, err = c.SubmitBatch(ctx, []SubmitRequest{{Kind: "inference:image:generate", Input: map[string]any{"prompt": "ok"}}, {Kind: "inference:image:generate"}})
	if !errors.Is(err, ErrInvalidRequest) {
		t.Fatalf("a refused batch: %v", err)
	}
	refused, _ := asAPIError(t, err).Details["errors"].([]any)
	if len(refused) != 1 || refused[0].(map[string]any)["index"] != float64(1) {
		t.Fatalf("the refused jobs: %v", refused)
	}
	poor := newTestClient(t, g.url, g.poorKey)
	if _, err := poor.SubmitBatch(ctx, []SubmitRequest{{Kind: "inference:image:generate", Input: map[string]any{"prompt": "a"}}}); !errors.Is(err, ErrInsufficientCredits) {
		t.Fatalf("short of credits: %v", err)
	}
	if _, err := poor.GetBatch(ctx, b.BatchID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("another account's batch: %v", err)
	}
}
