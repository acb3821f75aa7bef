import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import https from 'node:https';
import type { AddressInfo, Socket } from 'node:net';
import path from 'node:path';
import { promisify } from 'node:util';

export interface SeenRequest {
  method: string;
  pathname: string;
  query: Record<string, string>;
  headers: IncomingHttpHeaders;
  body: string;
}

/** Answers a request as it likes: streams, stalls, resets (`res.socket`), or never answers. */
export type RawHandler = (req: IncomingMessage, res: ServerResponse) => void;

export interface ScriptedAnswer {
  status: number;
  headers?: Record<string, string>;
  body?: string | Buffer;
}

/**
 * A real HTTPS endpoint standing in for an account's tool: a self-signed certificate for
 * 127.0.0.1 made by the openssl CLI (the gateway trusts it only through OUTBOUND_CA_FILE), every
 * request recorded, each path answered from its script, else 200 with a JSON echo.
 */
export class ToolServer {
  readonly seen: SeenRequest[] = [];
  port = 0;
  /** TLS connections accepted so far. */
  connections = 0;
  private server?: https.Server;
  private readonly scripts = new Map<string, ScriptedAnswer>();
  private readonly handlers = new Map<string, RawHandler>();

  constructor(private readonly dir: string) {}

  /** The PEM file to name in OUTBOUND_CA_FILE. */
  get caFile(): string {
    return path.join(this.dir, 'tool-cert.pem');
  }

  async start(): Promise<this> {
    const keyFile = path.join(this.dir, 'tool-key.pem');
    const args = ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '1', '-subj', '/CN=127.0.0.1', '-addext', 'subjectAltName=IP:127.0.0.1'];
    await promisify(execFile)('openssl', [...args, '-keyout', keyFile, '-out', this.caFile]);
    this.server = https.createServer({ key: readFileSync(keyFile), cert: readFileSync(this.caFile) }, (req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const url = new URL(req.url ?? '/', 'https://127.0.0.1');
        const seen = { method: req.method ?? '', pathname: url.pathname, query: Object.fromEntries(url.searchParams), headers: req.headers, body: Buffer.concat(chunks).toString('utf8') };
        this.seen.push(seen);
        const handler = this.handlers.get(url.pathname);
        if (handler) return handler(req, res);
        const scripted = this.scripts.get(url.pathname);
        if (scripted) return void res.writeHead(scripted.status, scripted.headers).end(scripted.body ?? '');
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ echo: { method: seen.method, query: seen.query, body: seen.body } }));
      });
    });
    this.server.on('secureConnection', () => this.connections++);
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    this.port = (this.server.address() as AddressInfo).port;
    return this;
  }

  url(pathname: string): string {
    return `https://127.0.0.1:${this.port}${pathname}`;
  }

  /** Every later request to `pathname` gets this answer. */
  script(pathname: string, answer: ScriptedAnswer): void {
    this.scripts.set(pathname, answer);
  }

  /** Every later request to `pathname` goes to `handler` (after its body was read). */
  handle(pathname: string, handler: RawHandler): void {
    this.handlers.set(pathname, handler);
  }

  at(pathname: string): SeenRequest[] {
    return this.seen.filter((r) => r.pathname === pathname);
  }

  async stop(): Promise<void> {
    if (!this.server) return;
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server!.close(() => resolve()));
  }
}

/** Sends a TCP RST on the connection under a TLS socket (resetAndDestroy takes only the TCP socket). */
export function resetConnection(socket: Socket): void {
  (socket as Socket & { _parent: Socket })._parent.resetAndDestroy();
}
