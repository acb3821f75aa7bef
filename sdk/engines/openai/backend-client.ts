import http from 'node:http';
import https from 'node:https';

/**
 * How the openai engine talks HTTP to its backend: one request, its answer, and a way to end
 * the exchange. The default goes through node:http(s) and the global keep-alive agents; the
 * `fetch` option swaps in a fetch (a proxy, an agent of the caller's). Node's fetch costs about
 * five times the CPU of node:http per streamed completion (its web streams, Request and
 * AbortSignal objects, a WebAssembly HTTP parser; docs/benchmarks.md, "stream"), and with many
 * short completions that was most of a worker's CPU.
 */

export interface BackendRequest {
  method: 'GET' | 'POST';
  headers: Record<string, string>;
  body?: string;
}

/** The answer's status line and headers, and its body read one way or the other (once). */
export interface BackendAnswer {
  status: number;
  /** The content-type header, '' when there is none. */
  contentType: string;
  /** The whole body as UTF-8 text, a leading byte order mark dropped (as fetch's `text()`). */
  text(): Promise<string>;
  /**
   * Hands each piece of the body to `onBytes` as it arrives. Resolves when the body ended or
   * `onBytes` returned true (read enough); rejects when it throws or the connection breaks.
   */
  read(onBytes: (bytes: Uint8Array) => boolean | void): Promise<void>;
}

export interface BackendExchange {
  answer: Promise<BackendAnswer>;
  /** Ends it now (silence, the lease aborted): a pending answer or read rejects, the connection is closed. */
  abort(reason: unknown): void;
  /**
   * The engine is done with it, however it ended. A connection whose body was read to its end
   * goes back to the pool; one whose reader stopped at `[DONE]` gets `DRAIN_MS` for the rest of
   * the body to come; any other is closed, so none is left open.
   */
  release(): void;
}

/** Sends a request to `path` under the backend's base URL (its `/v1`). */
export type BackendClient = (path: string, request: BackendRequest) => BackendExchange;

/**
 * How long the end of a body may take to come after the reader stopped at `[DONE]`: servers
 * end the response right after it, and a connection read to its end can serve the next call.
 */
export const DRAIN_MS = 1000;

/** Where http.request sends a URL, as it would derive it from the URL itself. */
function targetOf(url: URL): http.RequestOptions {
  const auth = url.username || url.password ? `${decodeURIComponent(url.username)}:${decodeURIComponent(url.password)}` : undefined;
  return { protocol: url.protocol, hostname: url.hostname.replace(/^\[(.*)\]$/, '$1'), port: url.port, path: `${url.pathname}${url.search}`, auth };
}

/**
 * The default client: node:http or node:https, keep-alive, to the backend at `base` (without a
 * trailing slash). The base is parsed once, not for every call; one with a query or fragment,
 * where a path appended to it lands elsewhere, is parsed with the path each time.
 */
export function nodeHttpClient(base: string): BackendClient {
  const url = new URL(base);
  const transport = url.protocol === 'https:' ? https : http;
  const target = targetOf(url);
  const basePath = url.pathname === '/' ? '' : url.pathname;
  const plain = url.search === '' && url.hash === '' && base.endsWith(basePath);
  return (path, request) => exchange(transport, plain ? { ...target, path: `${basePath}${path}` } : targetOf(new URL(`${base}${path}`)), request);
}

function exchange(transport: typeof http | typeof https, target: http.RequestOptions, request: BackendRequest): BackendExchange {
  const headers = request.body === undefined ? request.headers : { ...request.headers, 'content-length': String(Buffer.byteLength(request.body)) };
  let res: http.IncomingMessage | undefined;
  let stoppedEarly = false;
  const req = transport.request({ ...target, method: request.method, headers });
  const answer = new Promise<BackendAnswer>((resolve, reject) => {
    // Kept for the whole exchange: a socket error after the answer came reaches the body's reader too.
    req.on('error', reject);
    req.once('response', (r: http.IncomingMessage) => {
      res = r;
      const read = (onBytes: (bytes: Uint8Array) => boolean | void) =>
        new Promise<void>((done, fail) => {
          const stop = (err?: unknown) => {
            r.off('data', onData).off('end', onEnd).off('error', stop).off('close', onClose);
            if (err === undefined) done();
            else fail(err);
          };
          const onData = (bytes: Buffer) => {
            let enough: boolean | void;
            try {
              enough = onBytes(bytes);
            } catch (err) {
              return stop(err);
            }
            if (enough) {
              stoppedEarly = true;
              stop();
            }
          };
          const onEnd = () => stop();
          // Destroyed without an error event (aborted by us): the answer did not end.
          const onClose = () => stop(new Error('the connection closed before the answer ended'));
          r.on('data', onData).once('end', onEnd).once('error', stop).once('close', onClose);
        });
      resolve({
        status: r.statusCode ?? 0,
        contentType: r.headers['content-type'] ?? '',
        read,
        async text() {
          const parts: Buffer[] = [];
          await read((bytes) => void parts.push(bytes as Buffer));
          return new TextDecoder().decode(Buffer.concat(parts));
        },
      });
    });
  });
  req.end(request.body);
  return {
    answer,
    abort: (reason) => req.destroy(reason instanceof Error ? reason : new Error(String(reason))),
    release() {
      if (res?.complete) {
        // All of it came; what no reader took is dropped, and the socket goes back to the pool.
        res.resume();
      } else if (res && stoppedEarly) {
        const r = res;
        const timer = setTimeout(() => req.destroy(), DRAIN_MS).unref();
        r.once('end', () => clearTimeout(timer)).resume();
      } else {
        req.destroy();
      }
    },
  };
}

/** A client through the caller's fetch, read as the engine read fetch's responses before it had its own client. */
export function fetchClient(doFetch: typeof fetch, base: string): BackendClient {
  return (path, request) => {
    const ac = new AbortController();
    const answer = doFetch(`${base}${path}`, { method: request.method, headers: request.headers, body: request.body, signal: ac.signal }).then(
      (res): BackendAnswer => ({
        status: res.status,
        contentType: res.headers.get('content-type') ?? '',
        text: () => res.text(),
        async read(onBytes) {
          if (!res.body) return;
          for await (const bytes of res.body as unknown as AsyncIterable<Uint8Array>) if (onBytes(bytes)) break;
        },
      }),
    );
    // Whatever ended the call, its connection is not left open (a stream read up to [DONE], an error).
    return { answer, abort: (reason) => ac.abort(reason), release: () => ac.abort() };
  };
}
