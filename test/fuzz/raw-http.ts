import http from 'node:http';

/** One request exactly as the fuzzer sends it: the path is not normalised or re-encoded. */
export interface FuzzRequest {
  operationId: string;
  method: string;
  /** Path and query, as written on the request line. */
  path: string;
  headers: Record<string, string>;
  body?: Buffer;
  /** How the request was made (which credential, which malformed variants), for summaries and failures. */
  variant: string[];
}

export interface RawAnswer {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
  /** The answer was a stream (SSE): the fuzzer read its head and hung up. */
  streamed: boolean;
}

const agent = new http.Agent({ keepAlive: true, maxSockets: 8 });

/**
 * Sends `req` to `base` with node:http (fetch would resolve `..`, re-encode the path and refuse
 * odd header bytes, which are what the fuzzer wants to send). Resolves with the answer, or
 * rejects with why there was none (no answer within `timeoutMs`, a reset before the status line).
 */
export function sendRaw(base: URL, req: FuzzRequest, timeoutMs: number): Promise<RawAnswer> {
  return new Promise((resolve, reject) => {
    let answered = false;
    const r = http.request(
      { host: base.hostname, port: base.port, method: req.method, path: req.path, headers: { ...req.headers, ...(req.body ? { 'content-length': String(req.body.length) } : {}) }, agent, timeout: timeoutMs },
      (res) => {
        answered = true;
        if (/^text\/event-stream/.test(res.headers['content-type'] ?? '')) {
          // An open stream of a valid request: its head is what there is to check.
          res.destroy();
          resolve({ status: res.statusCode!, headers: res.headers, body: Buffer.alloc(0), streamed: true });
          return;
        }
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: Buffer.concat(chunks), streamed: false }));
        res.on('error', (err) => reject(new Error(`the answer's body broke off: ${err.message}`)));
      },
    );
    r.on('timeout', () => r.destroy(new Error(`no answer within ${timeoutMs} ms`)));
    r.on('error', (err: NodeJS.ErrnoException) => {
      // A server may answer (413) and close before it read a large body: the write then fails
      // after the answer came, which is not a missing answer.
      if (!answered) reject(err);
    });
    r.end(req.body);
  });
}

/** Closes the kept-alive sockets, so the process can exit. */
export function closeSockets(): void {
  agent.destroy();
}
