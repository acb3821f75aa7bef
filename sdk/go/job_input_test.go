package switchyard

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

// Get with WithInclude("input") gives the input the run was given; without it, none.
func TestGetWithIncludeInput(t *testing.T) {
	g := needGateway(t)
	ctx := testCtx(t)
	c := newTestClient(t, g.url, g.key)
	sent := map[string]any{"prompt": "a cat", "width": 96.0, "height": 64.0, "style": map[string]any{"palette": []any{"teal", "amber"}, "on": false}}
	run, err := c.Submit(ctx, SubmitRequest{Kind: "inference:image:generate", Input: sent, Confidentiality: stuck})
	if err != nil {
		t.Fatal(err)
	}
	cancelLater(t, c, run.RunID)
	withInput, err := c.Get(ctx, run.RunID, WithInclude("input"))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(withInput.Input, sent) {
		t.Fatalf("input: got %#v, want %#v", withInput.Input, sent)
	}
	plain, err := c.Get(ctx, run.RunID)
	if err != nil {
		t.Fatal(err)
	}
	if plain.Input != nil || strings.Contains(string(plain.Raw), `"input"`) {
		t.Fatalf("without WithInclude the job has no input: %s", plain.Raw)
	}
	_, err = c.Get(ctx, run.RunID, WithInclude("inputs"))
	if !errors.Is(err, ErrInvalidRequest) {
		t.Fatalf("want invalid_request, got %v", err)
	}
	if apiErr := asAPIError(t, err); apiErr.Details["path"] != "/include" {
		t.Fatalf("the refusal names /include: %+v", apiErr)
	}
}
