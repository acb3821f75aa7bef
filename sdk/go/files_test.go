package switchyard

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

func TestFiles(t *testing.T) {
	g := needGateway(t)
	ctx := testCtx(t)
	c := newTestClient(t, g.url, g.key)
	data := pngOf(t, 3)
	sum := sha256.Sum256(data)

	uploaded, err := c.Files.Upload(ctx, bytes.NewReader(data), UploadOptions{Filename: "photo.png"})
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^file_[0-9A-Z]{26}$`).MatchString(uploaded.ID) || uploaded.Filename != "photo.png" || uploaded.ContentType != "image/png" ||
		uploaded.Size != int64(len(data)) || uploaded.SHA256 != hex.EncodeToString(sum[:]) || uploaded.URL != g.url+"/v1/files/"+uploaded.ID {
		t.Fatalf("uploaded: %+v", uploaded)
	}

	path := filepath.Join(t.TempDir(), "local.png")
	if err := os.WriteFile(path, pngOf(t, 4), 0o600); err != nil {
		t.Fatal(err)
	}
	local, err := c.Files.UploadFile(ctx, path, UploadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if local.Filename != "local.png" || local.ContentType != "image/png" {
		t.Fatalf("from a path: %+v", local)
	}

	got, err := c.Files.Get(ctx, uploaded.ID)
	if err != nil || *got != *uploaded {
		t.Fatalf("get: %+v %v", got, err)
	}
	page, err := c.Files.List(ctx, 1, "")
	if err != nil || len(page.Data) != 1 || page.Data[0].ID != local.ID || page.NextCursor == nil {
		t.Fatalf("list, newest first: %+v %v", page, err)
	}
	res, err := c.Files.Content(ctx, uploaded.ID)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil || !bytes.Equal(body, data) {
		t.Fatalf("content: %d bytes, %v", len(body), err)
	}

	for _, id := range []string{uploaded.ID, local.ID} {
		if err := c.Files.Delete(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Files.Get(ctx, uploaded.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a deleted file: %v", err)
	}
	if _, err := c.Files.Content(ctx, uploaded.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a deleted file's content: %v", err)
	}
}
