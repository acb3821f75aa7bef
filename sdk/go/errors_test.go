package switchyard

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The gateway's one map of codes to statuses (ERROR_STATUS in models/errors.ts), read from
// this checkout so that a code added there and forgotten here fails.
func gatewayCodes(t *testing.T) map[string]int {
	t.Helper()
	src, err := os.ReadFile("../../models/errors.ts")
	if err != nil {
		t.Skipf("models/errors.ts is not beside this module (%v): the client is outside its repository", err)
	}
	block := regexp.MustCompile(`(?s)export const ERROR_STATUS = \{(.*?)\} as const`).FindSubmatch(src)
	if block == nil {
		t.Fatal("ERROR_STATUS not found in models/errors.ts")
	}
	codes := map[string]int{}
	for _, m := range regexp.MustCompile(`(?m)^\s*([a-z_]+):\s*(\d{3}),`).FindAllSubmatch(block[1], -1) {
		status, _ := strconv.Atoi(string(m[2]))
		codes[string(m[1])] = status
	}
	if len(codes) < 20 {
		t.Fatalf("read only %d codes from models/errors.ts", len(codes))
	}
	return codes
}

// Every code the gateway may send, as the gateway sends it: the envelope, X-Request-Id and,
// for some, Retry-After. Each becomes an *APIError that matches its sentinel and no other.
func TestEveryGatewayCodeIsMapped(t *testing.T) {
	codes := gatewayCodes(t)
	for code := range errorsByCode {
		if _, ok := codes[code]; !ok && code != CodeInvalidResponse {
			t.Errorf("the client maps %s, which models/errors.ts does not have", code)
		}
	}
	var current struct {
		code   string
		status int
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Request-Id", "req-"+current.code)
		if current.status == 429 || current.status == 503 {
			w.Header().Set("Retry-After", "3")
		}
		w.WriteHeader(current.status)
		_, _ = w.Write([]byte(`{"error":{"code":"` + current.code + `","message":"about ` + current.code + `","details":{"n":1}}}`))
	}))
	defer srv.Close()
	c := newTestClient(t, srv.URL, "k")
	for code, status := range codes {
		current.code, current.status = code, status
		sentinel := SentinelFor(code)
		if sentinel == nil {
			t.Errorf("%s (%d) has no sentinel", code, status)
			continue
		}
		_, err := c.Get(context.Background(), missingRun)
		apiErr := asAPIError(t, err)
		if apiErr.Status != status || apiErr.Code != code || apiErr.Message != "about "+code || apiErr.RequestID != "req-"+code || apiErr.Details["n"] != float64(1) {
			t.Errorf("%s: %+v", code, apiErr)
		}
		if !errors.Is(err, sentinel) {
			t.Errorf("%s does not match its sentinel", code)
		}
		for other, s := range errorsByCode {
			if other != code && errors.Is(err, s) {
				t.Errorf("%s also matches %s", code, other)
			}
		}
		wantRetry := status == 429 || status >= 500
		if apiErr.Retryable() != wantRetry {
			t.Errorf("%s: retryable %v", code, apiErr.Retryable())
		}
		if (status == 429 || status == 503) && apiErr.RetryAfter != 3*time.Second {
			t.Errorf("%s: Retry-After %s", code, apiErr.RetryAfter)
		}
		if !strings.Contains(err.Error(), code) || !strings.Contains(err.Error(), "req-"+code) {
			t.Errorf("%s: message %q", code, err.Error())
		}
	}
}

// A proxy's HTML error page keeps its status, as invalid_response; so does a 200 that is not JSON.
func TestAnswersThatAreNotTheContract(t *testing.T) {
	status := 502
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(status)
		_, _ = w.Write([]byte("<h1>Bad gateway</h1>"))
	}))
	defer srv.Close()
	c := newTestClient(t, srv.URL, "k")
	_, err := c.Get(context.Background(), missingRun)
	apiErr := asAPIError(t, err)
	if apiErr.Status != 502 || apiErr.Code != CodeInvalidResponse || !errors.Is(err, ErrInvalidResponse) || string(apiErr.Body) != "<h1>Bad gateway</h1>" || !apiErr.Retryable() {
		t.Fatalf("%+v", apiErr)
	}
	status = 200
	if _, err := c.Get(context.Background(), missingRun); !errors.Is(err, ErrInvalidResponse) {
		t.Fatalf("a 200 that is not a job: %v", err)
	}
}

// The codes a caller can meet on the client's own routes, from the real gateway.
func TestGatewayErrors(t *testing.T) {
	g := needGateway(t)
	ctx := testCtx(t)
	c := newTestClient(t, g.url, g.key)
	image := "inference:image:generate"
	check := func(name string, err error, sentinel error, status int) *APIError {
		t.Helper()
		if !errors.Is(err, sentinel) {
			t.Fatalf("%s: want %v, got %v", name, sentinel, err)
		}
		apiErr := asAPIError(t, err)
		if apiErr.Status != status || apiErr.RequestID == "" || apiErr.Message == "" {
			t.Fatalf("%s: %+v", name, apiErr)
		}
		return apiErr
	}

	_, err := c.Submit(ctx, SubmitRequest{Kind: image, Input: map[string]any{"prompt": 7}})
	if e := check("invalid_request", err, ErrInvalidRequest, 400); e.Details["errors"] == nil {
		t.Fatalf("schema errors in details: %+v", e.Details)
	}
	_, err = c.Submit(ctx, SubmitRequest{Kind: "inference:nope", Input: map[string]any{}})
	if e := check("unknown_kind", err, ErrUnknownKind, 400); e.Details["kinds"] == nil {
		t.Fatalf("the kinds in details: %+v", e.Details)
	}
	_, err = c.Submit(ctx, SubmitRequest{Kind: image, Input: map[string]any{"prompt": "x", "model": "no-such-model"}})
	check("unknown_model", err, ErrUnknownModel, 400)
	_, err = c.Submit(ctx, SubmitRequest{Kind: image, Input: map[string]any{"prompt": "x"}, Webhook: "http://hooks.example.com/x"})
	check("invalid_url", err, ErrInvalidURL, 400)
	_, err = c.Submit(ctx, SubmitRequest{Kind: image, Input: map[string]any{"prompt": "x"}, Webhook: "https://127.0.0.1/x"})
	check("url_blocked", err, ErrURLBlocked, 400)
	_, err = newTestClient(t, g.url, "sy_not_a_real_key").Get(ctx, missingRun)
	check("unauthorized", err, ErrUnauthorized, 401)
	_, err = c.Get(ctx, missingRun, WithHeader("X-Request-Id", "go-client-404"))
	if e := check("not_found", err, ErrNotFound, 404); e.RequestID != "go-client-404" {
		t.Fatalf("the gateway echoes the caller's request id: %q", e.RequestID)
	}
	_, err = c.Submit(ctx, SubmitRequest{Kind: image, Input: map[string]any{"prompt": "x", "padding": strings.Repeat("x", 4<<20)}})
	check("payload_too_large (JSON)", err, ErrPayloadTooLarge, 413)
	_, err = c.Files.Upload(ctx, bytes.NewReader(pngOf(t, 2)), UploadOptions{ContentType: "audio/wav"})
	if e := check("unsupported_media_type", err, ErrUnsupportedMediaType, 415); e.Details["detected"] != "image/png" {
		t.Fatalf("details: %+v", e.Details)
	}

	if g.poorKey == "" {
		t.Skipf("set %s for insufficient_credits and quota_exceeded", envPoorKey)
	}
	poor := newTestClient(t, g.url, g.poorKey)
	_, err = poor.Submit(ctx, SubmitRequest{Kind: "inference:video:generate", Input: map[string]any{"prompt": "costly"}})
	if e := check("insufficient_credits", err, ErrInsufficientCredits, 402); e.Details["needed"] != float64(40) {
		t.Fatalf("details: %+v", e.Details)
	}
	fileMax, _ := strconv.Atoi(os.Getenv(envFileMax))
	quota, _ := strconv.Atoi(os.Getenv(envQuota))
	if fileMax == 0 || quota == 0 || fileMax >= quota {
		t.Skipf("set %s below %s for payload_too_large and quota_exceeded on uploads", envFileMax, envQuota)
	}
	_, err = poor.Files.Upload(ctx, strings.NewReader(strings.Repeat("a", fileMax+1)), UploadOptions{ContentType: "text/plain", Filename: "big.txt"})
	check("payload_too_large (upload)", err, ErrPayloadTooLarge, 413)
	var kept []string
	defer func() {
		for _, id := range kept {
			_ = poor.Files.Delete(context.Background(), id)
		}
	}()
	for used := 0; ; {
		f, err := poor.Files.Upload(ctx, strings.NewReader(strings.Repeat("q", fileMax)), UploadOptions{ContentType: "text/plain", Filename: "fill.txt"})
		if used+fileMax > quota {
			check("quota_exceeded", err, ErrQuotaExceeded, 409)
			break
		}
		if err != nil {
			t.Fatalf("upload within the quota (%d of %d used): %v", used, quota, err)
		}
		kept = append(kept, f.ID)
		used += fileMax
	}
}
