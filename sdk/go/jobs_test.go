package switchyard

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"testing"
	"time"
)

var runIDPattern = regexp.MustCompile(`^run_[0-9A-Z]{26}$`)

// Every kind of the catalogue, submitted and waited for, its artifacts those the
// capabilities promise. File inputs come from an upload (a PNG made here) and from the
// artifacts of earlier runs, as jobs chain.
func TestSubmitEachKindAndWait(t *testing.T) {
	g := needGateway(t)
	ctx := testCtx(t)
	c := newTestClient(t, g.url, g.key)

	caps, err := c.Capabilities(ctx)
	if err != nil {
		t.Fatal(err)
	}
	promised := map[string][]string{}
	for _, k := range caps.Kinds {
		if k.Workers < 1 {
			t.Fatalf("%s has no worker: %+v", k.Kind, k)
		}
		for _, a := range k.OutputArtifacts {
			if a.Always {
				promised[k.Kind] = append(promised[k.Kind], a.Name)
			}
		}
	}

	image, err := c.Files.Upload(ctx, bytes.NewReader(pngOf(t, 1)), UploadOptions{Filename: "seed.png", ContentType: "image/png"})
	if err != nil {
		t.Fatal(err)
	}
	urlOf := func(job *Job, name string) string {
		for _, f := range job.Output.Files {
			if f.Name == name {
				return f.URL
			}
		}
		t.Fatalf("%s has no %s: %s", job.Kind, name, job.Raw)
		return ""
	}

	done := map[string]*Job{}
	// Each kind by one of the three ways to wait, so all of them see every kind of output.
	waitFor := func(kind string, input map[string]any, i int) *Job {
		t.Helper()
		var job *Job
		var err error
		switch i % 3 {
		case 0:
			job, err = c.Submit(ctx, SubmitRequest{Kind: kind, Input: input}, WithWait(30*time.Second))
		case 1:
			job, err = c.Submit(ctx, SubmitRequest{Kind: kind, Input: input})
			if err == nil {
				job, err = c.Wait(ctx, job.RunID, WaitOptions{Interval: 50 * time.Millisecond, Timeout: 30 * time.Second})
			}
		case 2:
			job, err = c.Submit(ctx, SubmitRequest{Kind: kind, Input: input})
			if err == nil {
				job, err = c.Wait(ctx, job.RunID, WaitOptions{Events: true, Timeout: 30 * time.Second})
			}
		}
		if err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
		if !job.Terminal || job.Status != StatusSucceeded {
			t.Fatalf("%s ended %s: %s", kind, job.Status, job.Raw)
		}
		done[kind] = job
		return job
	}

	steps := []struct {
		kind  string
		input func() map[string]any
	}{
		{"inference:image:generate", func() map[string]any { return map[string]any{"prompt": "a lighthouse", "width": 64, "height": 64} }},
		{"inference:3d:image-to-mesh", func() map[string]any { return map[string]any{"image": image.ID} }},
		{"inference:3d:text-to-mesh", func() map[string]any { return map[string]any{"prompt": "a chair"} }},
		{"inference:texture:generate", func() map[string]any {
			return map[string]any{"mesh": urlOf(done["inference:3d:text-to-mesh"], "mesh.glb"), "prompt": "bark", "resolution": 64}
		}},
		{"inference:rig", func() map[string]any {
			return map[string]any{"mesh": urlOf(done["inference:3d:text-to-mesh"], "mesh.glb")}
		}},
		{"inference:video:generate", func() map[string]any { return map[string]any{"prompt": "a ball", "fps": 4, "duration_s": 0.5} }},
		{"inference:llm:text-generate", func() map[string]any { return map[string]any{"prompt": "Tell me about trains", "max_tokens": 16} }},
		{"inference:audio:music-generate", func() map[string]any { return map[string]any{"prompt": "calm piano", "duration_s": 0.5} }},
		{"inference:audio:sfx-generate", func() map[string]any { return map[string]any{"prompt": "laser", "duration_s": 0.3} }},
		{"inference:audio:text-to-speech", func() map[string]any { return map[string]any{"text": "hello there"} }},
		{"inference:audio:transcribe", func() map[string]any {
			return map[string]any{"audio": urlOf(done["inference:audio:text-to-speech"], "speech.wav")}
		}},
	}
	for i, step := range steps {
		job := waitFor(step.kind, step.input(), i)
		if len(job.Output.URLs) == 0 || len(job.Output.Files) != len(job.Output.URLs) {
			t.Fatalf("%s: output %s", step.kind, job.Raw)
		}
		names := map[string]bool{}
		for i, f := range job.Output.Files {
			names[f.Name] = true
			if f.URL != job.Output.URLs[i] || f.SHA256 == nil || f.Size == nil {
				t.Fatalf("%s: file %d %+v against %s", step.kind, i, f, job.Output.URLs[i])
			}
		}
		for _, name := range promised[step.kind] {
			if !names[name] {
				t.Fatalf("%s: no %s among %v", step.kind, name, job.Output.URLs)
			}
		}
	}
	if len(done) != len(caps.Kinds) {
		t.Fatalf("ran %d kinds of the %d in the catalogue", len(done), len(caps.Kinds))
	}
	var text string
	if err := json.Unmarshal(done["inference:llm:text-generate"].Output.Fields["text"], &text); err != nil || text == "" {
		t.Fatalf("the llm output's own fields are kept: %q %v", text, err)
	}
	// What a job reserved and was charged, and what its worker reported it used (docs/jobs.md, "Cost").
	llm := done["inference:llm:text-generate"]
	if llm.Cost == nil || llm.Cost.Charged == nil || *llm.Cost.Charged > llm.Cost.Reserved || llm.Usage == nil || llm.Usage.OutputTokens == nil {
		t.Fatalf("cost and usage: %s", llm.Raw)
	}

	// The artifact URLs serve the files.
	res, err := http.Get(done["inference:image:generate"].Output.URLs[0])
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 200 || res.Header.Get("Content-Type") != "image/png" {
		t.Fatalf("artifact: %d %s", res.StatusCode, res.Header.Get("Content-Type"))
	}

	// Get answers the same job, terminal flag and raw body included.
	again, err := c.Get(ctx, done["inference:rig"].RunID)
	if err != nil {
		t.Fatal(err)
	}
	if !again.Terminal || string(again.Raw) != string(done["inference:rig"].Raw) {
		t.Fatalf("get: %s\nwait: %s", again.Raw, done["inference:rig"].Raw)
	}
}

func TestSubmitAcceptedAndWithWaitNotInTime(t *testing.T) {
	g := needGateway(t)
	ctx := testCtx(t)
	c := newTestClient(t, g.url, g.key)

	accepted, err := c.Submit(ctx, SubmitRequest{Kind: "inference:image:generate", Input: map[string]any{"prompt": "a cat"}, Class: "interactive"})
	if err != nil {
		t.Fatal(err)
	}
	if !runIDPattern.MatchString(accepted.RunID) || accepted.Status != StatusQueued || accepted.Terminal || accepted.Class != "interactive" {
		t.Fatalf("accepted: %+v", accepted)
	}
	var raw map[string]any
	if err := json.Unmarshal(accepted.Raw, &raw); err != nil {
		t.Fatal(err)
	}
	if _, has := raw["terminal"]; has || raw["run_id"] != accepted.RunID {
		t.Fatalf("raw is the 202 as sent: %s", accepted.Raw)
	}

	queued, err := c.Submit(ctx, SubmitRequest{Kind: "inference:image:generate", Input: map[string]any{"prompt": "never leased"}, Confidentiality: stuck}, WithWait(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	cancelLater(t, c, queued.RunID)
	if queued.Terminal || queued.Status != StatusQueued {
		t.Fatalf("a run still queued after the wait: %+v", queued)
	}
	if _, err := c.Submit(ctx, SubmitRequest{Kind: "inference:image:generate", Input: map[string]any{"prompt": "x"}}, WithWait(1500*time.Millisecond)); err == nil {
		t.Fatal("a wait of a fraction of a second is refused before sending")
	}
}

func TestIdempotentReplay(t *testing.T) {
	g := needGateway(t)
	ctx := testCtx(t)
	c := newTestClient(t, g.url, g.key)
	key := fmt.Sprintf("go-idem-%d", time.Now().UnixNano())
	body := SubmitRequest{Kind: "inference:audio:sfx-generate", Input: map[string]any{"prompt": "a door creaks"}, Confidentiality: stuck}

	first, err := c.Submit(ctx, body, WithIdempotencyKey(key))
	if err != nil {
		t.Fatal(err)
	}
	cancelLater(t, c, first.RunID)
	replay, err := c.Submit(ctx, body, WithIdempotencyKey(key))
	if err != nil {
		t.Fatal(err)
	}
	if replay.RunID != first.RunID {
		t.Fatalf("the replay made a second run: %s, %s", first.RunID, replay.RunID)
	}
	other, err := c.Submit(ctx, body)
	if err != nil {
		t.Fatal(err)
	}
	cancelLater(t, c, other.RunID)
	if other.RunID == first.RunID {
		t.Fatal("without the key, a new run")
	}

	body.Input = map[string]any{"prompt": "another body"}
	_, err = c.Submit(ctx, body, WithIdempotencyKey(key))
	if !errors.Is(err, ErrIdempotencyConflict) {
		t.Fatalf("want idempotency_conflict, got %v", err)
	}
	if apiErr := asAPIError(t, err); apiErr.Status != 409 || apiErr.Details["run_id"] != first.RunID {
		t.Fatalf("the conflict names the first run: %+v", apiErr)
	}
}

// More than two pages, walked by the iterator and by hand; newest first, nothing twice.
func TestListPagination(t *testing.T) {
	g := needGateway(t)
	ctx := testCtx(t)
	c := newTestClient(t, g.url, g.key)
	// This kind and tier are used by no other test, so the filter selects only these runs.
	const kind = "inference:audio:music-generate"
	var submitted []string
	for i := 0; i < 5; i++ {
		job, err := c.Submit(ctx, SubmitRequest{Kind: kind, Input: map[string]any{"prompt": fmt.Sprintf("page %d", i)}, Confidentiality: stuck})
		if err != nil {
			t.Fatal(err)
		}
		cancelLater(t, c, job.RunID)
		submitted = append(submitted, job.RunID)
	}
	var want []string
	for i := len(submitted) - 1; i >= 0; i-- {
		want = append(want, submitted[i])
	}
	params := ListParams{Kind: kind, Status: StatusQueued, Limit: 2}

	it := c.Jobs(params)
	var got []string
	var positions []int
	for it.Next(ctx) {
		job := it.Job()
		if job.Kind != kind || job.Status != StatusQueued || job.Terminal || job.QueuePosition == nil {
			t.Fatalf("list item: %s", job.Raw)
		}
		got = append(got, job.RunID)
		positions = append(positions, *job.QueuePosition)
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("iterated %v, want newest first %v", got, want)
	}
	// Listed queued jobs carry their place in the queue, which only they are in: the newest last.
	if fmt.Sprint(positions) != fmt.Sprint([]int{5, 4, 3, 2, 1}) {
		t.Fatalf("queue positions %v, want [5 4 3 2 1]", positions)
	}
	if it.Pages() != 3 || it.Cursor() != "" {
		t.Fatalf("pages %d, cursor %q", it.Pages(), it.Cursor())
	}

	var byHand []string
	pages := 0
	for cursor := ""; ; {
		params.Cursor = cursor
		page, err := c.List(ctx, params)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, j := range page.Data {
			byHand = append(byHand, j.RunID)
		}
		if page.NextCursor == "" {
			break
		}
		if len(page.Data) != 2 {
			t.Fatalf("a page before the last holds %d", len(page.Data))
		}
		cursor = page.NextCursor
	}
	if pages != 3 || fmt.Sprint(byHand) != fmt.Sprint(want) {
		t.Fatalf("by hand: %d pages, %v", pages, byHand)
	}

	_, err := c.List(ctx, ListParams{Cursor: "not-a-cursor"})
	if !errors.Is(err, ErrInvalidRequest) {
		t.Fatalf("a made-up cursor: %v", err)
	}
}

func TestCancel(t *testing.T) {
	g := needGateway(t)
	ctx := testCtx(t)
	c := newTestClient(t, g.url, g.key)
	run, err := c.Submit(ctx, SubmitRequest{Kind: "inference:image:generate", Input: map[string]any{"prompt": "canceled"}, Confidentiality: stuck})
	if err != nil {
		t.Fatal(err)
	}
	canceled, err := c.Cancel(ctx, run.RunID)
	if err != nil {
		t.Fatal(err)
	}
	if canceled.Status != StatusCanceled || !canceled.Terminal || canceled.Error == nil || canceled.Error.Code != "canceled" {
		t.Fatalf("canceled: %s", canceled.Raw)
	}
	_, err = c.Cancel(ctx, run.RunID)
	if !errors.Is(err, ErrAlreadyTerminal) {
		t.Fatalf("a second cancel: %v", err)
	}
	apiErr := asAPIError(t, err)
	if apiErr.Status != 409 || apiErr.Details["status"] != "canceled" || apiErr.RequestID == "" || apiErr.Message == "" {
		t.Fatalf("the envelope: %+v", apiErr)
	}
	var env struct {
		Error struct{ Code, Message string }
	}
	if err := json.Unmarshal(apiErr.Body, &env); err != nil || env.Error.Code != "already_terminal" || env.Error.Message != apiErr.Message {
		t.Fatalf("the body: %s", apiErr.Body)
	}
	if _, err := c.Cancel(ctx, missingRun); !errors.Is(err, ErrNotFound) {
		t.Fatalf("an unknown run: %v", err)
	}
}

func TestCapabilitiesAndCapacity(t *testing.T) {
	g := needGateway(t)
	ctx := testCtx(t)
	c := newTestClient(t, g.url, g.key)
	caps, err := c.Capabilities(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var image *KindCapability
	for i := range caps.Kinds {
		if caps.Kinds[i].Kind == "inference:image:generate" {
			image = &caps.Kinds[i]
		}
	}
	if image == nil || image.Workers < 1 || image.WorkersByTier.Open != image.Workers || image.InputSchema["type"] != "object" || len(caps.Raw) == 0 {
		t.Fatalf("capabilities: %+v", image)
	}
	anonymous, err := NewClient(g.url)
	if err != nil {
		t.Fatal(err)
	}
	capacity, err := anonymous.Capacity(ctx)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, k := range capacity.ByKind {
		found = found || (k.Kind == "inference:image:generate" && k.Workers >= 1)
	}
	if capacity.Workers.Total < 1 || !found || capacity.UpdatedAt == "" {
		t.Fatalf("capacity: %s", capacity.Raw)
	}
	if _, err := anonymous.Capabilities(ctx); !errors.Is(err, ErrUnauthorized) {
		t.Fatalf("capabilities without a key: %v", err)
	}
}

// A queued job of a ranked model names the ranks it waits for (docs/ranks.md); other jobs carry null.
func TestDecodeJobWaitingRanks(t *testing.T) {
	job, err := decodeJob([]byte(`{"run_id":"run_01JHB3Q4ZK8M2N5P7R9S1T3V5W","kind":"inference:llm:text-generate","status":"queued","waiting_reason":"no_worker_for_rank","waiting_ranks":[0,2]}`))
	if err != nil {
		t.Fatal(err)
	}
	if job.WaitingReason == nil || *job.WaitingReason != "no_worker_for_rank" || fmt.Sprint(job.WaitingRanks) != "[0 2]" {
		t.Fatalf("waiting: %v %v", job.WaitingReason, job.WaitingRanks)
	}
	job, err = decodeJob([]byte(`{"run_id":"run_01JHB3Q4ZK8M2N5P7R9S1T3V5W","status":"queued","waiting_reason":null,"waiting_ranks":null}`))
	if err != nil || job.WaitingReason != nil || job.WaitingRanks != nil {
		t.Fatalf("null waiting: %v %v %v", err, job.WaitingReason, job.WaitingRanks)
	}
}
