/**
 * The ways a call to an engine's inference server (the "backend": an OpenAI-compatible server,
 * ComfyUI, a Cog container) fails, as the lease failure the worker SDK reports: it reads `code`
 * and `retryable` off the thrown error (docs/engines.md). Shared by the engines so that a failure
 * reads the same whatever the backend.
 *
 * - `upstream_unavailable`, retryable: the backend could not be reached, stayed silent too long,
 *   cut its stream short, failed mid-stream, or answered 408, 429 or 5xx. Another attempt (here
 *   or on another worker) may well succeed.
 * - `upstream_error`, not retryable: any other error status (400, 401, 404...): the backend
 *   refused this request, and would refuse it again.
 * - `upstream_bad_response`, retryable: the answer was not in the backend's format (not JSON, not
 *   chunks, not a ComfyUI history): a backend fault, which another worker's backend may not share.
 * - `upstream_failed`, retryable: the backend took the request and failed while running it
 *   (ComfyUI's `execution_error`: out of memory, a model file that will not load). Another
 *   worker, with more memory or other files, may well succeed; the attempts limit the cost.
 */
export type UpstreamErrorCode = 'upstream_unavailable' | 'upstream_error' | 'upstream_bad_response' | 'upstream_failed';

export class UpstreamError extends Error {
  override readonly name = 'UpstreamError';
  constructor(
    readonly code: UpstreamErrorCode,
    message: string,
    readonly retryable: boolean,
    /** The backend's HTTP status, when it answered with one. */
    readonly status?: number,
  ) {
    super(message);
  }
}

/** 408 (timeout), 429 (rate limit, overload) and every 5xx are worth another try; other statuses are the request's fault. */
export const isRetryableStatus = (status: number) => status === 408 || status === 429 || status >= 500;

/** The longest piece of a backend's error body quoted in a message. */
const MAX_QUOTED = 500;

export const quote = (text: string) => (text.length > MAX_QUOTED ? `${text.slice(0, MAX_QUOTED)}...` : text);

/**
 * The message of an error body: OpenAI's `{error: {message, type, param, code}}`, which vLLM,
 * llama.cpp and LM Studio follow; Ollama's `{error: "text"}`; FastAPI's `{detail}` (TGI and some
 * proxies); else the text itself.
 */
export function describeErrorBody(text: string): string {
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    return quote(text.trim()) || 'no details';
  }
  const b = (body ?? {}) as Record<string, unknown>;
  const err = b.error;
  if (err && typeof err === 'object') {
    const e = err as Record<string, unknown>;
    const message = typeof e.message === 'string' && e.message ? e.message : JSON.stringify(e);
    const tags = [e.type, e.code].filter((t): t is string => typeof t === 'string' && t !== '');
    return quote(message) + (tags.length ? ` (${[...new Set(tags)].join(', ')})` : '');
  }
  if (typeof err === 'string' && err) return quote(err);
  if (typeof b.message === 'string' && b.message) return quote(b.message);
  if (typeof b.detail === 'string' && b.detail) return quote(b.detail);
  return quote(text.trim());
}

/**
 * An error answer of the backend (`what`: the call, e.g. `POST /chat/completions`); `describe`
 * reads the body of a backend whose errors have a shape of their own.
 */
export async function errorOfResponse(res: Pick<Response, 'status' | 'text'>, what: string, describe: (text: string) => string = describeErrorBody): Promise<UpstreamError> {
  const text = await res.text().catch(() => '');
  const retryable = isRetryableStatus(res.status);
  return new UpstreamError(retryable ? 'upstream_unavailable' : 'upstream_error', `the backend answered ${what} with ${res.status}: ${describe(text)}`, retryable, res.status);
}

/**
 * A call that got no answer: refused, reset, unresolvable. Node's fetch hides the reason in
 * `cause`; node:http's error carries it as `code`.
 */
export function errorOfFetch(err: unknown, what: string, backendUrl: string): UpstreamError {
  const e = err as { message?: string; code?: unknown; cause?: { code?: string; message?: string } };
  const why = e?.cause?.code ?? (typeof e?.code === 'string' ? e.code : undefined) ?? e?.cause?.message ?? e?.message ?? String(err);
  return new UpstreamError('upstream_unavailable', `the backend at ${backendUrl} could not be reached (${what}): ${why}`, true);
}
