import { createHash } from 'node:crypto';
import type { EngineArtifact } from '../engines/types.js';
import type { LeaseInfo } from '../protocol/index.js';
import { readError, retryAfterMs, TRANSIENT_STATUS, withRetries, type TryResult } from './http-retry.js';

/** What the gateway answers to an artifact upload (docs/worker-protocol.md, "Leases"). */
export interface UploadedArtifact {
  /** Absolute URL that a plain GET fetches: put it in the job's `output.urls`. */
  url: string;
  sha256: string;
  size: number;
  content_type: string;
  expires_at?: string;
}

export interface UploadOptions {
  /** Aborts the upload (and its retries); the promise rejects with the signal's reason. */
  signal?: AbortSignal;
  /** Further tries after a network error or a transient answer (408, 429, 5xx). @defaultValue 3 */
  retries?: number;
  /** Wait before the first retry, doubled at each one (with jitter). @defaultValue 250 */
  retryDelayMs?: number;
  /** Gives up on one try after this long. @defaultValue 120000 */
  timeoutMs?: number;
  /**
   * How long `503 unavailable` answers (the gateway cannot reach its datastore, a passing
   * outage) are retried on top of `retries`, counted from the first of them. @defaultValue 60000
   */
  outageMs?: number;
  /** For tests or custom agents. @defaultValue globalThis.fetch */
  fetch?: typeof fetch;
}

/**
 * An upload that did not succeed. `status` is the HTTP status (0 when none arrived), `code`
 * the gateway's error code when it sent its error envelope, and `retryable` tells whether the
 * same upload could work later (it is false for refusals such as an expired lease, 401, or a
 * file over the size limit, 413).
 */
export class UploadError extends Error {
  override readonly name = 'UploadError';
  constructor(
    message: string,
    readonly status: number,
    readonly code: string,
    readonly retryable: boolean,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

function isUploaded(value: unknown): value is UploadedArtifact {
  const v = value as Partial<UploadedArtifact> | null;
  return !!v && typeof v.url === 'string' && /^https?:\/\//.test(v.url) && typeof v.sha256 === 'string' && typeof v.size === 'number' && typeof v.content_type === 'string';
}

/**
 * Uploads one artifact of a lease: `POST {uploadUrl}?name=<artifact.name>` with the lease's
 * upload token as a bearer and the bytes as the body (sent as they are, with their
 * Content-Length, no copy). Network errors and transient answers are retried a few times with
 * backoff; the answer is checked against the bytes sent (size and sha256). Throws an
 * `UploadError` when the upload cannot be done, or the signal's reason when aborted.
 */
export async function uploadArtifact(uploadUrl: string, token: string, artifact: EngineArtifact, opts: UploadOptions = {}): Promise<UploadedArtifact> {
  if (!artifact || typeof artifact.name !== 'string' || artifact.name === '') throw new TypeError('an artifact needs a name');
  if (!((artifact.data as unknown) instanceof Uint8Array)) throw new TypeError(`artifact ${artifact.name}: data must be a Buffer`);
  const doFetch = opts.fetch ?? globalThis.fetch;
  const retries = opts.retries ?? 3;
  const baseDelay = opts.retryDelayMs ?? 250;
  const timeoutMs = opts.timeoutMs ?? 120_000;
  const outageMs = opts.outageMs ?? 60_000;
  const url = new URL(uploadUrl);
  url.searchParams.set('name', artifact.name);
  const bytes = new Uint8Array(artifact.data.buffer, artifact.data.byteOffset, artifact.data.byteLength);
  const sha256 = createHash('sha256').update(bytes).digest('hex');
  const failed = (error: UploadError, waitMs: number | null = null): TryResult<UploadedArtifact> => ({
    ok: false,
    error,
    retryable: error.retryable,
    // A datastore outage on the gateway's side is waited out without spending the retries.
    outage: error.status === 503 && error.code === 'unavailable',
    waitMs,
  });

  return withRetries({ retries, baseDelayMs: baseDelay, outageMs, signal: opts.signal }, async () => {
    const timeout = AbortSignal.timeout(timeoutMs);
    const signal = opts.signal ? AbortSignal.any([opts.signal, timeout]) : timeout;
    try {
      const res = await doFetch(url, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': artifact.contentType || 'application/octet-stream' },
        body: bytes,
        signal,
      });
      if (!res.ok) {
        const { code, message } = await readError(res);
        return failed(new UploadError(`upload of ${artifact.name} refused (${res.status} ${code}): ${message}`, res.status, code, TRANSIENT_STATUS.has(res.status)), retryAfterMs(res.headers.get('retry-after'), 10_000));
      }
      const body: unknown = await res.json().catch(() => null);
      if (!isUploaded(body)) return failed(new UploadError(`the gateway's answer to the upload of ${artifact.name} is not {url, sha256, size, content_type}`, res.status, 'bad_answer', false));
      if (body.size !== bytes.byteLength || body.sha256 !== sha256) {
        return failed(new UploadError(`the gateway stored ${body.size} bytes (sha256 ${body.sha256}) for ${artifact.name}, not the ${bytes.byteLength} sent (${sha256})`, res.status, 'corrupted', true));
      }
      return { ok: true, value: body };
    } catch (err) {
      if (opts.signal?.aborted) throw opts.signal.reason;
      const timedOut = timeout.aborted;
      return failed(
        new UploadError(
          timedOut ? `upload of ${artifact.name} timed out after ${timeoutMs} ms` : `upload of ${artifact.name} failed: ${(err as Error).message}`,
          0,
          timedOut ? 'timeout' : 'network_error',
          true,
          { cause: err },
        ),
      );
    }
  });
}

/**
 * Uploads a lease's artifacts one after the other: their URLs for `output.urls`, and the name and
 * sha256 of each for a receipt (the upload checked that the gateway stored exactly these bytes).
 */
export async function uploadArtifacts(lease: Pick<LeaseInfo, 'upload_url' | 'upload_token'>, artifacts: EngineArtifact[], opts: UploadOptions): Promise<{ urls: string[]; signed: Array<{ name: string; sha256: string }> }> {
  const urls: string[] = [];
  const signed: Array<{ name: string; sha256: string }> = [];
  for (const artifact of artifacts) {
    const uploaded = await uploadArtifact(lease.upload_url, lease.upload_token, artifact, opts);
    urls.push(uploaded.url);
    signed.push({ name: artifact.name, sha256: uploaded.sha256 });
  }
  return { urls, signed };
}
