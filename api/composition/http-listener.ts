import { randomUUID } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';
import { ApiError } from '../../models/errors.js';
import { rawErrorAnswer } from '../http/middleware/error-handler.js';
import type { ErrorStyle } from '../http/route-spec.js';
import { ConfigError } from '../main/config.js';

/** At shutdown, how long in-flight requests may take before their connections are cut. */
const HTTP_GRACE_MS = 10_000;

/** A WebSocket server that answers the upgrades of its own path and declines the others. */
export interface UpgradeHandler {
  handleUpgrade(req: http.IncomingMessage, socket: Duplex, head: Buffer): boolean;
}

export interface HttpListenerOptions {
  host: string;
  port: number;
  handler: http.RequestListener;
  /** Asked in turn; an upgrade none of them takes is dropped. */
  upgrades: UpgradeHandler[];
  /** True once the gateway is stopping: answers then close their connection. */
  stopping: () => boolean;
  /** The error style of a path's route, so a request the parser refused is answered in it too. */
  errorStyleOf?: (path: string) => ErrorStyle;
}

/**
 * The path on the request line of a request Node's parser refused, when that line is there: the
 * route it names decides the shape of the error (raw bytes past ASCII in the path are refused
 * there, before any route sees them).
 */
function refusedPath(err: NodeJS.ErrnoException & { rawPacket?: Buffer }): string | null {
  const line = err.rawPacket?.subarray(0, 8192).toString('latin1').split('\r\n', 1)[0] ?? '';
  const target = /^[A-Z]+ (\S+)/.exec(line)?.[1];
  return target?.startsWith('/') ? target.split('?', 1)[0] : null;
}

/** Answers malformed HTTP (bad headers, oversize headers) with the error envelope instead of a bare 400. */
function answerClientError(err: NodeJS.ErrnoException, socket: Duplex, styleOf: (path: string) => ErrorStyle): void {
  if (!socket.writable || err.code === 'ECONNRESET') {
    socket.destroy();
    return;
  }
  const answer =
    err.code === 'HPE_HEADER_OVERFLOW'
      ? new ApiError('headers_too_large', 'the request line and headers are too large')
      : new ApiError('invalid_request', 'the HTTP request is malformed');
  const path = refusedPath(err);
  socket.end(rawErrorAnswer(answer, { 'X-Request-Id': randomUUID() }, path === null ? 'contract' : styleOf(path)));
}

/** The process's HTTP server: requests to the app, upgrades to the socket servers, and a stop that cannot hang. */
export class HttpListener {
  // No whole-request deadline (a large artifact upload may rightly take minutes); a socket idle
  // for two minutes is closed instead, and headers must arrive within 20 s.
  private readonly server = http.createServer({ requestTimeout: 0, headersTimeout: 20_000, keepAliveTimeout: 65_000 });
  private closing?: Promise<void>;

  constructor(private readonly opts: HttpListenerOptions) {
    const server = this.server;
    server.setTimeout(120_000);
    server.on('clientError', (err: NodeJS.ErrnoException, socket: Duplex) => answerClientError(err, socket, opts.errorStyleOf ?? (() => 'contract')));
    // Answers given while stopping close their connection, so keep-alive clients open their
    // next one through the load balancer to another instance.
    server.on('request', (req, res) => {
      if (opts.stopping()) res.setHeader('Connection', 'close');
      opts.handler(req, res);
    });
    server.on('upgrade', (req, socket, head) => {
      if (!opts.upgrades.some((u) => u.handleUpgrade(req, socket, head))) socket.destroy();
    });
  }

  /** Resolves with the address bound (PORT=0 picks a free port); a port in use is a ConfigError naming PORT. */
  async listen(): Promise<{ url: string; port: number }> {
    const { host, port } = this.opts;
    await new Promise<void>((resolve, reject) => {
      this.server.once('error', (err: NodeJS.ErrnoException) => {
        // The one setting that fixes it, named: the raw EADDRINUSE does not say what to change.
        if (err.code === 'EADDRINUSE') reject(new ConfigError([`PORT ${port} on ${host} is already in use: stop what listens there, or set PORT to another port (PORT=0 picks a free one)`]));
        else if (err.code === 'EACCES') reject(new ConfigError([`PORT ${port} on ${host} needs privileges this process does not have: set PORT to 1024 or above`]));
        else reject(err);
      });
      this.server.listen(port, host, () => resolve());
    });
    const bound = (this.server.address() as AddressInfo).port;
    return { url: `http://${host === '0.0.0.0' ? '127.0.0.1' : host}:${bound}`, port: bound };
  }

  /**
   * Stops listening at once; the promise resolves when every connection has ended: requests in
   * flight finish, keep-alive connections close as they go idle, and after HTTP_GRACE_MS
   * whatever is still open (a stuck client) is cut so shutdown cannot hang.
   */
  close(): Promise<void> {
    if (this.closing) return this.closing;
    if (!this.server.listening) return Promise.resolve();
    this.closing = new Promise<void>((resolve) => {
      const idle = setInterval(() => this.server.closeIdleConnections(), 100);
      const force = setTimeout(() => this.server.closeAllConnections(), HTTP_GRACE_MS);
      this.server.close(() => {
        clearInterval(idle);
        clearTimeout(force);
        resolve();
      });
    });
    return this.closing;
  }
}
