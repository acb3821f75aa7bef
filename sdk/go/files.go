package switchyard

import (
	"context"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
)

// FilesService is the Files API (docs/files.md), as Client.Files.
type FilesService struct {
	c *Client
}

// UploadOptions names and types an upload.
type UploadOptions struct {
	// Filename is sent as ?filename= (1 to 200 characters, no slash); empty lets the gateway
	// name it upload.<extension>.
	Filename string
	// ContentType is the declared type; the gateway reads the real one from the bytes and
	// refuses a declared type that names another format (ErrUnsupportedMediaType). Empty
	// sends application/octet-stream, which takes the detected type.
	ContentType string
	// Size is the body's length in bytes, sent as Content-Length so the gateway refuses a
	// file over its limits at once; a negative value sends the body chunked. Zero means
	// unknown unless the reader is a *bytes.Reader, *bytes.Buffer or *strings.Reader.
	Size int64
}

// Upload sends POST /v1/files with body as the raw bytes, streamed as they are read. The
// call's timeout covers the whole upload: raise it (WithTimeout) for large files on slow links.
func (f *FilesService) Upload(ctx context.Context, body io.Reader, opts UploadOptions, reqOpts ...RequestOption) (*File, error) {
	q := url.Values{}
	if opts.Filename != "" {
		q.Set("filename", opts.Filename)
	}
	contentType := opts.ContentType
	if contentType == "" {
		contentType = "application/octet-stream"
	}
	size := opts.Size
	if size == 0 {
		size = -1
		if l, ok := body.(interface{ Len() int }); ok {
			size = int64(l.Len())
		}
	}
	b, err := f.c.call(ctx, f.c.config(reqOpts), request{method: "POST", path: "/v1/files", query: q, body: body, contentType: contentType, contentLength: size})
	if err != nil {
		return nil, err
	}
	var file File
	if err := decode(b, &file); err != nil {
		return nil, err
	}
	return &file, nil
}

// UploadFile uploads a local file, named after its base name and typed from its extension
// unless opts say otherwise, with its size as Content-Length.
func (f *FilesService) UploadFile(ctx context.Context, path string, opts UploadOptions, reqOpts ...RequestOption) (*File, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("switchyard: upload: %w", err)
	}
	defer fh.Close()
	info, err := fh.Stat()
	if err != nil {
		return nil, fmt.Errorf("switchyard: upload: %w", err)
	}
	if opts.Filename == "" {
		opts.Filename = filepath.Base(path)
	}
	if opts.ContentType == "" {
		opts.ContentType = mime.TypeByExtension(filepath.Ext(path))
	}
	if opts.Size == 0 {
		opts.Size = info.Size()
		if opts.Size == 0 {
			opts.Size = -1
		}
	}
	return f.Upload(ctx, fh, opts, reqOpts...)
}

// Get reads GET /v1/files/{file_id}; an unknown, expired or other account's file is ErrNotFound.
func (f *FilesService) Get(ctx context.Context, id string, opts ...RequestOption) (*File, error) {
	b, err := f.c.call(ctx, f.c.config(opts), request{method: "GET", path: "/v1/files/" + escape(id)})
	if err != nil {
		return nil, err
	}
	var file File
	if err := decode(b, &file); err != nil {
		return nil, err
	}
	return &file, nil
}

// List reads one page of GET /v1/files, newest first, with the Quota that all of the account's
// files fill; limit 0 means the gateway's default.
func (f *FilesService) List(ctx context.Context, limit int, cursor string, opts ...RequestOption) (*FilePage, error) {
	q := url.Values{}
	if limit != 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	b, err := f.c.call(ctx, f.c.config(opts), request{method: "GET", path: "/v1/files", query: q})
	if err != nil {
		return nil, err
	}
	var page FilePage
	if err := decode(b, &page); err != nil {
		return nil, err
	}
	return &page, nil
}

// Delete sends DELETE /v1/files/{file_id}: the file and its bytes are gone, and no longer
// count against the quota.
func (f *FilesService) Delete(ctx context.Context, id string, opts ...RequestOption) error {
	_, err := f.c.call(ctx, f.c.config(opts), request{method: "DELETE", path: "/v1/files/" + escape(id)})
	return err
}

// Content opens GET /v1/files/{file_id}/content. The timeout bounds the wait for the
// headers only; ctx also bounds reading the body. Close the response's Body.
func (f *FilesService) Content(ctx context.Context, id string, opts ...RequestOption) (*http.Response, error) {
	rc := f.c.config(opts)
	dl := newDeadline(ctx, rc.timeout)
	header := http.Header{}
	header.Set("Accept", "*/*")
	res, err := f.c.send(ctx, dl, request{method: "GET", path: "/v1/files/" + escape(id) + "/content", header: header})
	if err != nil {
		dl.done()
		return nil, err
	}
	dl.stopTimer()
	res.Body = &closeFunc{ReadCloser: res.Body, after: dl.done}
	return res, nil
}

// closeFunc runs after once its body is closed, so the request's context is released.
type closeFunc struct {
	io.ReadCloser
	after func()
}

func (c *closeFunc) Close() error {
	err := c.ReadCloser.Close()
	c.after()
	return err
}
