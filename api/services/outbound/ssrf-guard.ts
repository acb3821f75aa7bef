import { readFileSync } from 'node:fs';
import http, { type IncomingHttpHeaders, type IncomingMessage } from 'node:http';
import https from 'node:https';
import net from 'node:net';
import tls from 'node:tls';
import { ApiError } from '../../../models/errors.js';
import type { Config } from '../../main/config.js';
import { AddressPolicy, isLoopbackAddress, resolveHost } from './address-policy.js';
import { OutboundError } from './outbound-error.js';
import { limitedBody, type OutboundStream } from './outbound-stream.js';

export type OutboundPolicy = Config['outbound'];

export { OutboundError, type OutboundErrorCode } from './outbound-error.js';
export type { OutboundStream } from './outbound-stream.js';

export interface OutboundResponse {
  status: number;
  headers: IncomingHttpHeaders;
  body: Buffer;
}

export interface OutboundRequest {
  /** @defaultValue 'POST' */
  method?: string;
  headers?: Record<string, string>;
  body?: string | Buffer;
  /** Aborts the call; it then fails with code `aborted`. */
  signal?: AbortSignal;
  /** A larger (or smaller) answer limit than the policy's, for calls that fetch files. */
  maxResponseBytes?: number;
}

/** A GET whose body is read as it arrives ({@link SsrfGuard.stream}). */
export interface OutboundStreamRequest {
  headers?: Record<string, string>;
  /** Aborts the call, the body included; it then fails with code `aborted`. */
  signal?: AbortSignal;
  /** @defaultValue the policy's maxResponseBytes */
  maxResponseBytes?: number;
  /**
   * The whole call, to the last body byte. The policy's total timeout still bounds the wait for the
   * answer and every pause in the body, so a long fetch is one that keeps moving.
   * @defaultValue the policy's totalTimeoutMs
   */
  totalTimeoutMs?: number;
}

const BLOCKED = 'the URL leads to an address outbound calls may not reach (loopback, private, link-local or otherwise not public)';

/**
 * The SSRF guard: the one way the gateway calls a URL an account gave it (webhooks, custom
 * tools, bots, the https URLs of job input files).
 *
 * @remarks
 * The URL is checked when it is registered ({@link SsrfGuard.checkUrl}) and again at every call
 * ({@link SsrfGuard.request}, or {@link SsrfGuard.stream} for files), where the check runs on the addresses the connection is actually
 * made to: the agent's own DNS lookup refuses a name that resolves to any blocked address, so a
 * name that re-binds to an internal address after registration gets nowhere. Calls are plain
 * node:https through that agent, so proxy variables (`HTTPS_PROXY`, ...) are never consulted and
 * redirects are never followed.
 *
 * @example
 * ```ts
 * const guard = new SsrfGuard(config.outbound);
 * const url = await guard.checkUrl(input.url);                    // at registration
 * const res = await guard.request(url, { body: JSON.stringify(event), headers });
 * const file = await guard.stream(fileUrl, { maxResponseBytes, totalTimeoutMs }); // file.body: a Readable
 * ```
 */
/** Name resolution the guard uses: every address of a host name. */
export type HostResolver = (host: string) => Promise<string[]>;

export interface SsrfGuardOptions {
  /**
   * Resolves host names, at registration and again at every connect.
   * @defaultValue the system resolver (dns.lookup, both families; `localhost` without asking)
   */
  resolve?: HostResolver;
}

export class SsrfGuard {
  private readonly addresses: AddressPolicy;
  private readonly agent: https.Agent;
  private readonly resolve: HostResolver;
  /** DEV_ALLOW_LOCAL_PORTS (npm run dev only): on these ports, plain http and loopback too. */
  private readonly devPorts: Set<number>;
  /** Agents for dev-local ports, whose lookups also let loopback through; made on first use. */
  private devAgents?: { http: http.Agent; https: https.Agent };

  constructor(
    private readonly policy: OutboundPolicy,
    opts: SsrfGuardOptions = {},
  ) {
    this.resolve = opts.resolve ?? resolveHost;
    this.addresses = new AddressPolicy(policy.allowCidrs);
    this.devPorts = new Set(policy.devLocalPorts ?? []);
    this.agent = this.makeAgent(https, false);
  }

  /**
   * A keep-alive agent whose own DNS lookup refuses blocked addresses. `devLocal`: the agent
   * serves only dev-local ports, where loopback is allowed too.
   */
  private makeAgent(mod: typeof https, devLocal: boolean): https.Agent;
  private makeAgent(mod: typeof http, devLocal: boolean): http.Agent;
  private makeAgent(mod: typeof http | typeof https, devLocal: boolean): http.Agent | https.Agent {
    const policy = this.policy;
    return new mod.Agent({
      keepAlive: true,
      lookup: (host, options, callback) => {
        this.resolveAllowed(host, devLocal).then(
          (found) => {
            const addresses = found.map((address) => ({ address, family: net.isIP(address) }));
            if (options.all) callback(null, addresses);
            else callback(null, addresses[0].address, addresses[0].family);
          },
          (err: Error) => callback(err, ''),
        );
      },
      // Extra CAs are trusted beside the bundled roots, not instead of them. Built once: parsing
      // the root bundle for every connection would cost more than the handshake.
      secureContext:
        mod === https && policy.caFile ? tls.createSecureContext({ ca: [...tls.rootCertificates, readFileSync(policy.caFile, 'utf8')] }) : undefined,
    });
  }

  /**
   * Registration-time check: the URL must be https on an allowed port, without credentials,
   * and every address its host resolves to must be allowed. On a dev-local port
   * (DEV_ALLOW_LOCAL_PORTS, `npm run dev --allow-local`) plain http and loopback pass too.
   *
   * @returns the parsed URL.
   * @throws ApiError `invalid_url` (malformed, not https, credentials, port, a host that
   * does not resolve) or `url_blocked` (an address the guard refuses).
   */
  async checkUrl(url: string): Promise<URL> {
    try {
      const target = this.parse(url);
      await this.resolveAllowed(target.host, this.devPorts.has(target.port));
      return target.url;
    } catch (err) {
      if (err instanceof OutboundError) throw new ApiError(err.code === 'url_blocked' ? 'url_blocked' : 'invalid_url', err.message);
      throw new ApiError('invalid_url', 'the host of the URL does not resolve', { cause: err });
    }
  }

  /**
   * True when `address` (an IP literal) may be connected to under this policy; `devLocal`: for a
   * URL on a dev-local port, where loopback is allowed too.
   */
  isAllowedAddress(address: string, devLocal = false): boolean {
    return this.addresses.allows(address) || (devLocal && isLoopbackAddress(address));
  }

  /**
   * One https request to `url`, re-checked at connect time whether or not `checkUrl` ran, its
   * answer read whole.
   *
   * @remarks
   * Redirects are returned as they are, never followed. The connect timeout covers DNS, TCP and
   * the TLS handshake; the total timeout runs from the call to the last body byte. A body larger
   * than `maxResponseBytes` aborts the call.
   *
   * @returns the receiver's answer, whatever its status.
   * @throws OutboundError
   */
  async request(url: string | URL, req: OutboundRequest = {}): Promise<OutboundResponse> {
    const res = await this.open(url, req.method ?? 'POST', req, this.policy.totalTimeoutMs);
    const chunks: Buffer[] = [];
    for await (const chunk of res.body) chunks.push(chunk as Buffer);
    return { status: res.status, headers: res.headers, body: Buffer.concat(chunks) };
  }

  /**
   * One https GET of `url`, with the checks and timeouts of {@link SsrfGuard.request}, whose body
   * is handed back as it arrives instead of held: for files, which may be far larger than any
   * answer a webhook or tool gives.
   *
   * @remarks
   * Resolves once the headers are in, within the policy's total timeout. A `Content-Length` over
   * `maxResponseBytes` fails the call at once; a body that passes it fails as it does. The body
   * then has `totalTimeoutMs` from the call to end, and may pause at most the policy's total
   * timeout while it is read (see {@link OutboundStream.body}). Whoever stops reading early must
   * destroy the body.
   *
   * @returns the status, headers and body, whatever the status.
   * @throws OutboundError
   */
  async stream(url: string | URL, req: OutboundStreamRequest = {}): Promise<OutboundStream> {
    return this.open(url, 'GET', req, req.totalTimeoutMs ?? this.policy.totalTimeoutMs);
  }

  /** The call both methods make: resolves with the headers and the body, within `totalTimeoutMs`. */
  private async open(url: string | URL, method: string, req: OutboundRequest, totalTimeoutMs: number): Promise<OutboundStream> {
    const target = this.parse(url);
    const devLocal = this.devPorts.has(target.port);
    // Literals never reach the agent's lookup, so they are judged here.
    if (net.isIP(target.host) && !this.isAllowedAddress(target.host, devLocal)) throw new OutboundError('url_blocked', BLOCKED);
    const plain = target.url.protocol === 'http:';
    if (req.signal?.aborted) throw new OutboundError('aborted', 'the call was aborted');
    const { connectTimeoutMs } = this.policy;
    const maxBytes = req.maxResponseBytes ?? this.policy.maxResponseBytes;
    const deadline = Date.now() + totalTimeoutMs;
    // The answer's headers: within the policy's total timeout, and within the call's.
    const answerMs = Math.min(this.policy.totalTimeoutMs, totalTimeoutMs);

    return new Promise<OutboundStream>((resolve, reject) => {
      // Where the connection got to decides how a socket error is named.
      let phase: 'connect' | 'tls' | 'ready' = 'connect';
      let connectTimer: NodeJS.Timeout | undefined;
      let settled = false;
      const settle = (err: OutboundError | null, res?: IncomingMessage) => {
        if (settled) return;
        settled = true;
        clearTimeout(answerTimer);
        clearTimeout(connectTimer);
        req.signal?.removeEventListener('abort', onAbort);
        if (err) {
          call.destroy();
          reject(err);
        } else {
          // From here on the body reports every failure, the call's own errors included.
          const body = limitedBody(res!, { maxBytes, idleTimeoutMs: this.policy.totalTimeoutMs, totalTimeoutMs, deadline, signal: req.signal });
          resolve({ status: res!.statusCode!, headers: res!.headers, body });
        }
      };
      const onAbort = () => settle(new OutboundError('aborted', 'the call was aborted'));
      const answerTimer = setTimeout(() => settle(new OutboundError('timeout', `no answer within ${answerMs} ms`)), answerMs);
      req.signal?.addEventListener('abort', onAbort, { once: true });

      const agent = devLocal ? this.devAgent(plain) : this.agent;
      const call = (plain ? http : https).request(
        {
          agent,
          hostname: target.host,
          port: target.port,
          path: target.url.pathname + target.url.search,
          method,
          headers: req.headers,
          ...(plain ? {} : { rejectUnauthorized: true }), // also wins over NODE_TLS_REJECT_UNAUTHORIZED=0
        },
        (res) => {
          // Refused before a byte of the body is read: the sender said it would not fit.
          if (Number(res.headers['content-length']) > maxBytes) return settle(new OutboundError('response_too_large', `the response is larger than ${maxBytes} bytes`));
          settle(null, res);
        },
      );
      call.on('socket', (socket) => {
        if (call.reusedSocket) return void (phase = 'ready');
        connectTimer = setTimeout(() => settle(new OutboundError('timeout', `no connection within ${connectTimeoutMs} ms`)), connectTimeoutMs);
        socket.once('connect', () => {
          phase = plain ? 'ready' : 'tls';
          if (plain) clearTimeout(connectTimer);
        });
        socket.once('secureConnect', () => {
          phase = 'ready';
          clearTimeout(connectTimer);
        });
      });
      call.on('error', (err) => settle(this.socketError(err, phase)));
      call.end(req.body);
    });
  }

  /** Destroys the pooled connections. */
  close(): void {
    this.agent.destroy();
    this.devAgents?.http.destroy();
    this.devAgents?.https.destroy();
  }

  private devAgent(plain: boolean): http.Agent {
    this.devAgents ??= { http: this.makeAgent(http, true), https: this.makeAgent(https, true) };
    return plain ? this.devAgents.http : this.devAgents.https;
  }

  /** The URL rules that need no DNS; throws OutboundError `invalid_url`. */
  private parse(input: string | URL): { url: URL; host: string; port: number } {
    let url: URL;
    try {
      url = new URL(String(input));
    } catch {
      throw new OutboundError('invalid_url', 'not a valid URL');
    }
    const plain = url.protocol === 'http:';
    if (url.protocol !== 'https:' && !plain) throw new OutboundError('invalid_url', 'the URL must use https');
    if (url.username || url.password) throw new OutboundError('invalid_url', 'the URL must not carry credentials');
    const port = url.port === '' ? (plain ? 80 : 443) : Number(url.port);
    const devLocal = this.devPorts.has(port);
    // Plain http only on a port the developer named for `npm run dev`; never otherwise.
    if (plain && !devLocal) throw new OutboundError('invalid_url', 'the URL must use https');
    if (!this.policy.allowedPorts.includes(port) && !devLocal) {
      throw new OutboundError('invalid_url', `port ${port} is not allowed (allowed: ${this.policy.allowedPorts.join(', ')})`);
    }
    // WHATWG parsing already turned decimal, octal, hex and short IPv4 forms into dotted quads.
    const host = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
    return { url, host, port };
  }

  /** Every address `host` stands for, when all of them are allowed; else OutboundError `url_blocked`. */
  private async resolveAllowed(host: string, devLocal = false): Promise<string[]> {
    const addresses = net.isIP(host) ? [host] : await this.resolve(host);
    // Every answer, not just the first: the connection may use any of them (happy eyeballs, retries).
    if (addresses.length === 0 || !addresses.every((a) => this.isAllowedAddress(a, devLocal))) throw new OutboundError('url_blocked', BLOCKED);
    return addresses;
  }

  private socketError(err: Error, phase: 'connect' | 'tls' | 'ready'): OutboundError {
    if (err instanceof OutboundError) return err;
    if (phase === 'tls') return new OutboundError('tls_failed', `TLS handshake failed: ${err.message}`, { cause: err });
    return new OutboundError('connect_failed', err.message, { cause: err });
  }
}
