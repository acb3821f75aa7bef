package switchyard

import (
	"bytes"
	"context"
	"image"
	"image/color"
	"image/png"
	"os"
	"testing"
	"time"
)

// The gateway tests run against a real gateway with demo workers serving every kind, which
// test/go-client.test.ts starts for them. Without these variables they are skipped, so a
// plain `go test` runs only the offline tests.
const (
	envURL      = "SWITCHYARD_TEST_URL"       // the gateway's base URL
	envKey      = "SWITCHYARD_TEST_KEY"       // an account key with plenty of credits
	envPoorKey  = "SWITCHYARD_TEST_POOR_KEY"  // an account key with 1 credit and no files
	envProxyURL = "SWITCHYARD_TEST_PROXY_URL" // a TCP proxy to the gateway that cuts event streams
	envFileMax  = "SWITCHYARD_TEST_FILE_MAX_BYTES"
	envQuota    = "SWITCHYARD_TEST_QUOTA_BYTES"
)

// Jobs of this tier stay queued: the test workers are open-tier, and an open worker never
// takes a trusted job. Tests that need a run that does not end use it.
const stuck = "trusted"

const missingRun = "run_01HZZZZZZZZZZZZZZZZZZZZZZZ"

type gateway struct {
	url, key, poorKey, proxyURL string
}

func needGateway(t *testing.T) gateway {
	t.Helper()
	g := gateway{url: os.Getenv(envURL), key: os.Getenv(envKey), poorKey: os.Getenv(envPoorKey), proxyURL: os.Getenv(envProxyURL)}
	if g.url == "" || g.key == "" {
		t.Skipf("no gateway: set %s and %s (test/go-client.test.ts does, around a real gateway with demo workers)", envURL, envKey)
	}
	return g
}

func newTestClient(t *testing.T, base, key string, opts ...ClientOption) *Client {
	t.Helper()
	c, err := NewClient(base, append([]ClientOption{WithAPIKey(key)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// testCtx bounds a test as a whole: a hang fails it instead of stalling the suite.
func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// cancelLater cancels a run that must not be left queued when the test ends.
func cancelLater(t *testing.T, c *Client, runID string) {
	t.Cleanup(func() {
		_, _ = c.Cancel(context.Background(), runID)
	})
}

// pngOf makes a small PNG whose pixels depend on seed, so uploads differ.
func pngOf(t *testing.T, seed int) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, 16, 16))
	for y := 0; y < 16; y++ {
		for x := 0; x < 16; x++ {
			img.Set(x, y, color.RGBA{uint8(x*16 + seed), uint8(y * 16), uint8(seed * 7), 255})
		}
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func asAPIError(t *testing.T, err error) *APIError {
	t.Helper()
	apiErr, ok := err.(*APIError)
	if !ok {
		t.Fatalf("want an *APIError, got %T: %v", err, err)
	}
	return apiErr
}
