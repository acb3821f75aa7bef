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
	"strconv"
	"testing"
)

func TestFiles(t *testing.T) {
	g := needGateway(t)
	ctx := testCtx(t)
	c := newTestClient(t, g.url, g.key)
	data := pngOf(t, 3)
	sum := sha256.Sum256(data)
	quota, _ := strconv.ParseInt(os.Getenv(envQuota), 10, 64)
	// usedNow is what the account's files hold, as the listing says, checked against the quota.
	usedNow := func(what string) int64 {
		page, err := c.Files.List(ctx, 1, "")
		if err != nil || page.Quota == nil {
			t.Fatalf("%s: the listing's quota: %+v %v", what, page, err)
		}
		if quota != 0 && page.Quota.QuotaBytes != quota {
			t.Fatalf("%s: quota_bytes %d, want %d (%s)", what, page.Quota.QuotaBytes, quota, envQuota)
		}
		return page.Quota.UsedBytes
	}
	before := usedNow("before the uploads")

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
	// The quota counts every file of the account, not only the page's one.
	if used, want := usedNow("after the uploads"), before+uploaded.Size+local.Size; used != want {
		t.Fatalf("used_bytes after two uploads: %d, want %d", used, want)
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
	if used := usedNow("after the deletes"); used != before {
		t.Fatalf("used_bytes after the deletes: %d, want %d back", used, before)
	}
	if _, err := c.Files.Get(ctx, uploaded.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a deleted file: %v", err)
	}
	if _, err := c.Files.Content(ctx, uploaded.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a deleted file's content: %v", err)
	}
}
