import { Deadline } from './deadline.js';
import { SwitchyardApiError, SwitchyardNetworkError, SwitchyardTimeoutError, apiErrorFrom } from './errors.js';

export type FetchLike = (input: string, init?: RequestInit) => Promise<Response>;

export interface TransportOptions {
  baseUrl: string;
  apiKey?: string;
  /** Default per-request timeout; 0 or undefined = none. */
  timeoutMs?: number;
  fetch?: FetchLike;
}

export interface TransportRequest {
  method: string;
  path: string;
  query?: Record<string, string | number | undefined>;
  /** Sent as JSON. */
  body?: unknown;
  /** Sent as raw bytes (uploads), with `type` as Content-Type; not with `body`. */
  upload?: UploadBody;
  headers?: Record<string, string>;
  timeoutMs?: number;
  signal?: AbortSignal;
}

/**
 * The bytes of an upload: a Blob (fetch sets its Content-Length), or a stream of `size` bytes
 * (a file read from disk in Node, sent as it is read, with Content-Length set from `size`).
 */
export type UploadBody = { blob: Blob; type: string } | { stream: ReadableStream<Uint8Array>; size: number; type: string };

export interface TransportResponse {
  status: number;
  headers: Headers;
  /** The parsed JSON body; undefined for an empty one. */
  body: unknown;
}

/**
 * HTTP for the client: base URL joining, the bearer key, timeouts through AbortController,
 * JSON in and out, and every failure turned into a typed error. Only fetch and URL are used.
 */
export class HttpTransport {
  readonly baseUrl: string;
  readonly timeoutMs: number | undefined;
  private readonly apiKey: string | undefined;
  private readonly fetchImpl: FetchLike;

  constructor(opts: TransportOptions) {
    const base = new URL(opts.baseUrl); // throws a TypeError on a malformed URL
    if (base.protocol !== 'http:' && base.protocol !== 'https:') throw new TypeError(`baseUrl must be http(s), not ${opts.baseUrl}`);
    this.baseUrl = base.href.endsWith('/') ? base.href : `${base.href}/`;
    this.apiKey = opts.apiKey;
    this.timeoutMs = opts.timeoutMs;
    // Unbound window.fetch throws "Illegal invocation" in browsers; call it through globalThis.
    this.fetchImpl = opts.fetch ?? ((input, init) => globalThis.fetch(input, init));
  }

  url(path: string, query?: TransportRequest['query']): string {
    const url = new URL(path.replace(/^\/+/, ''), this.baseUrl);
    for (const [name, value] of Object.entries(query ?? {})) if (value !== undefined) url.searchParams.set(name, String(value));
    return url.href;
  }

  headers(extra: Record<string, string> = {}): Record<string, string> {
    const headers: Record<string, string> = { accept: 'application/json', ...extra };
    if (this.apiKey) headers.authorization = `Bearer ${this.apiKey}`;
    return headers;
  }

  /** Sends a request and returns its parsed JSON; error statuses throw SwitchyardApiError. */
  async request(req: TransportRequest): Promise<TransportResponse> {
    const deadline = new Deadline(req.timeoutMs ?? this.timeoutMs, req.signal);
    try {
      const res = await this.send(req, deadline);
      let text: string;
      try {
        text = await res.text();
      } catch (err) {
        throw this.failure(err, req, deadline);
      }
      const body = parseJson(text);
      if (text !== '' && body === undefined) {
        throw new SwitchyardApiError({ status: res.status, code: 'invalid_response', message: `${req.method} ${req.path} answered ${res.status} with a body that is not JSON`, requestId: res.headers.get('x-request-id') ?? undefined, body: text });
      }
      return { status: res.status, headers: res.headers, body };
    } finally {
      deadline.dispose();
    }
  }

  /**
   * Sends a request under `deadline` and returns the response once its headers are in, its
   * body unread; an error status is read and thrown as a SwitchyardApiError.
   */
  async send(req: TransportRequest, deadline: Deadline): Promise<Response> {
    const headers = this.headers(req.headers);
    let body: string | Blob | ReadableStream<Uint8Array> | undefined;
    let streamed = false;
    if (req.upload !== undefined) {
      headers['content-type'] = req.upload.type || 'application/octet-stream';
      if ('blob' in req.upload) {
        body = req.upload.blob;
      } else {
        body = req.upload.stream;
        streamed = true;
        headers['content-length'] = String(req.upload.size);
      }
    } else if (req.body !== undefined) {
      body = JSON.stringify(req.body);
      headers['content-type'] = 'application/json';
    }
    let res: Response;
    try {
      const init: RequestInit & { duplex?: 'half' } = { method: req.method, headers, body, signal: deadline.signal };
      if (streamed) {
        init.duplex = 'half'; // fetch requires it for a stream body
        // Any other mode makes fetch keep a copy of the body for a redirect that cannot come:
        // Node's fetch would then hold the whole file in memory by the end of the upload.
        init.redirect = 'error';
      }
      res = await this.fetchImpl(this.url(req.path, req.query), init);
    } catch (err) {
      if (req.upload && 'stream' in req.upload) await req.upload.stream.cancel().catch(() => undefined); // closes the file
      throw this.failure(err, req, deadline);
    }
    if (res.ok) return res;
    let text = '';
    try {
      text = await res.text();
    } catch (err) {
      throw this.failure(err, req, deadline);
    }
    throw apiErrorFrom(res.status, parseJson(text) ?? text, res.headers);
  }

  /** What a thrown fetch or body read means: the caller's abort, our timeout, or the network. */
  failure(err: unknown, req: Pick<TransportRequest, 'method' | 'path'>, deadline: Deadline): unknown {
    if (err instanceof SwitchyardApiError) return err;
    if (deadline.timedOut) {
      return new SwitchyardTimeoutError(`${req.method} ${req.path} got no complete answer within ${deadline.timeoutMs} ms`, { timeoutMs: deadline.timeoutMs!, cause: err });
    }
    if (deadline.callerAborted) return deadline.signal.reason ?? err;
    const detail = err instanceof Error ? ((err.cause as Error | undefined)?.message ?? err.message) : String(err);
    return new SwitchyardNetworkError(`${req.method} ${req.path} failed: ${detail}`, { cause: err });
  }
}

function parseJson(text: string): unknown {
  if (text === '') return undefined;
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}
