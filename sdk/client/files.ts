import { Deadline } from './deadline.js';
import type { HttpTransport, UploadBody } from './http-transport.js';
import { baseName, contentTypeOf, openLocalFile } from './local-file.js';
import type { FilePage, FileQuota, JsonObject, ListFilesParams, RequestOptions, SwitchyardFile, UploadOptions, UploadSource } from './types.js';

/**
 * The Files API (docs/files.md): `client.files`. Uploads are sent raw (`POST /v1/files` with the
 * file's Content-Type and `?filename=`), streamed: a path is read from disk 64 KB at a time as
 * fetch sends it, with its Content-Length (so the gateway refuses a file over its limits at once).
 */
export class SwitchyardFiles {
  constructor(private readonly http: HttpTransport) {}

  /**
   * POST /v1/files. `source` is a local path (Node only), a Blob or File, or bytes; see
   * UploadOptions for the name and type sent. The request's timeout (the client's, or
   * `opts.timeoutMs`; 0 = none) covers the whole upload: raise it for large files on slow links.
   * The gateway's refusals are typed errors (413 and 415 are SwitchyardApiError with `code`
   * `payload_too_large` / `unsupported_media_type`, 409 `quota_exceeded` a SwitchyardConflictError);
   * a path that cannot be opened is a SwitchyardError.
   */
  async upload(source: UploadSource, opts: UploadOptions = {}): Promise<SwitchyardFile> {
    const { upload, filename } = await uploadBody(source, opts);
    const res = await this.http.request({ method: 'POST', path: '/v1/files', query: { filename }, upload, timeoutMs: opts.timeoutMs, signal: opts.signal });
    return res.body as SwitchyardFile;
  }

  /** GET /v1/files: the account's files, newest first, and what they all hold against the quota. */
  async list(params: ListFilesParams = {}, opts: RequestOptions = {}): Promise<FilePage> {
    const res = await this.http.request({ method: 'GET', path: '/v1/files', query: { limit: params.limit, cursor: params.cursor }, ...opts });
    const raw = res.body as JsonObject;
    const page: FilePage = { data: (raw.data as SwitchyardFile[] | undefined) ?? [], next_cursor: (raw.next_cursor as string | null | undefined) ?? null };
    if (raw.quota) page.quota = raw.quota as unknown as FileQuota;
    return page;
  }

  /** GET /v1/files/{file_id}; an unknown, expired or other account's file is a SwitchyardNotFoundError. */
  async get(id: string, opts: RequestOptions = {}): Promise<SwitchyardFile> {
    return (await this.http.request({ method: 'GET', path: filePath(id), ...opts })).body as SwitchyardFile;
  }

  /** DELETE /v1/files/{file_id}: the file and its bytes are gone, and no longer count against the quota. */
  async delete(id: string, opts: RequestOptions = {}): Promise<void> {
    await this.http.request({ method: 'DELETE', path: filePath(id), ...opts });
  }

  /**
   * GET /v1/files/{file_id}/content: the fetch Response, its body not yet read: `await
   * res.arrayBuffer()`, `res.body` (a ReadableStream), `res.headers.get('content-type')`. The
   * timeout bounds the wait for the response headers only; `opts.signal` also aborts the body.
   * An error status throws the typed error (404 SwitchyardNotFoundError) and returns nothing.
   */
  async content(id: string, opts: RequestOptions = {}): Promise<Response> {
    const deadline = new Deadline(opts.timeoutMs ?? this.http.timeoutMs, opts.signal);
    const req = { method: 'GET', path: `${filePath(id)}/content`, headers: { accept: '*/*' } };
    try {
      const res = await this.http.send(req, deadline);
      deadline.stopTimer();
      return res;
    } catch (err) {
      deadline.dispose();
      throw this.http.failure(err, req, deadline);
    }
  }
}

function filePath(id: string): string {
  return `/v1/files/${encodeURIComponent(id)}`;
}

/** The body sent for an upload source, and the file name to send with it. */
async function uploadBody(source: UploadSource, opts: Pick<UploadOptions, 'filename' | 'contentType'>): Promise<{ upload: UploadBody; filename?: string }> {
  if (typeof source === 'string') {
    if (source === '') throw new TypeError('upload needs a path, a Blob or bytes; got an empty string');
    const filename = opts.filename ?? baseName(source);
    return { upload: await openLocalFile(source, opts.contentType ?? contentTypeOf(filename)), filename };
  }
  if (typeof Blob !== 'undefined' && source instanceof Blob) {
    const named = (source as { name?: unknown }).name; // a File
    const filename = opts.filename ?? (typeof named === 'string' && named !== '' ? baseName(named) : undefined);
    return { upload: { blob: source, type: opts.contentType ?? (source.type || contentTypeOf(filename)) }, filename };
  }
  if (source instanceof Uint8Array) {
    return { upload: { blob: new Blob([source as Uint8Array<ArrayBuffer>]), type: opts.contentType ?? contentTypeOf(opts.filename) }, filename: opts.filename };
  }
  throw new TypeError('upload needs a path, a Blob or File, or a Uint8Array');
}

/** True for the values files.upload() takes other than paths: a Blob (or File) or bytes. */
export function isBinary(value: unknown): value is Blob | Uint8Array {
  return value instanceof Uint8Array || (typeof Blob !== 'undefined' && value instanceof Blob);
}
