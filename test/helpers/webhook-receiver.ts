import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import https from 'node:https';
import type { IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { promisify } from 'node:util';

export interface Received {
  path: string;
  headers: IncomingHttpHeaders;
  body: string;
}

export interface Answer {
  status: number;
  headers?: Record<string, string>;
}

/** An HTTPS receiver: records every request; answers each path from its script, then 200. */
/** An HTTPS receiver of webhooks (a self-signed certificate the gateway trusts through OUTBOUND_CA_FILE). */
export class Receiver {
  server!: https.Server;
  port!: number;
  received: Received[] = [];
  private readonly scripts = new Map<string, Answer[]>();

  async start(dir: string): Promise<this> {
    const key = path.join(dir, 'key.pem');
    const cert = path.join(dir, 'cert.pem');
    await promisify(execFile)('openssl', [
      'req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '1',
      '-keyout', key, '-out', cert, '-subj', '/CN=127.0.0.1', '-addext', 'subjectAltName=IP:127.0.0.1',
    ]);
    this.server = https.createServer({ key: readFileSync(key), cert: readFileSync(cert) }, (req, res) => {
      const parts: Buffer[] = [];
      req.on('data', (c: Buffer) => parts.push(c));
      req.on('end', () => {
        const url = req.url ?? '/';
        this.received.push({ path: url, headers: req.headers, body: Buffer.concat(parts).toString('utf8') });
        const answer = this.scripts.get(url)?.shift() ?? { status: 200 };
        res.writeHead(answer.status, answer.headers).end('ok');
      });
    });
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', () => resolve()));
    this.port = (this.server.address() as AddressInfo).port;
    return this;
  }

  /** The receiver's CA file: its own certificate. */
  static caFile(dir: string): string {
    return path.join(dir, 'cert.pem');
  }

  url(p: string): string {
    return `https://127.0.0.1:${this.port}${p}`;
  }

  script(p: string, answers: Answer[]): void {
    this.scripts.set(p, answers);
  }

  at(p: string): Received[] {
    return this.received.filter((r) => r.path === p);
  }

  async stop(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

