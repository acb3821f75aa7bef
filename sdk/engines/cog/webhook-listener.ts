import { randomBytes } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * Where the Cog server reports each prediction. Cog's only way to tell a client how an async
 * prediction goes is a webhook (Cog's docs/http.md: "For JSON responses, the only supported way to
 * receive updates on the status of predictions started asynchronously is using webhooks.
 * Polling for prediction status is not currently supported."): it POSTs the whole prediction
 * object (`{id, status, output, logs, error, metrics}`) on start, output, logs and completion.
 *
 * The listener takes POST /<secret>/<prediction id> only: the secret, made at start, keeps
 * anyone else who can reach the port from reporting a prediction's outcome.
 */
export type WebhookHandler = (report: Record<string, unknown> | WebhookTooLarge) => void;

/** A report the listener would not read: the prediction's output (files inlined as data URIs) is over its limit. */
export class WebhookTooLarge extends Error {}

/** Cog inlines output files as data URIs in every report: room for a long video, not for a runaway. */
export const MAX_WEBHOOK_BYTES = 512 * 1024 * 1024;

export class WebhookListener {
  private readonly secret = randomBytes(18).toString('base64url');
  private readonly handlers = new Map<string, WebhookHandler>();
  private server: http.Server | null = null;
  private base = '';

  /**
   * `listen`: host:port to bind (port 0: any free one). `publicUrl`: the base URL the Cog
   * server reaches it at, when that is not the bound address (a container on a bridge network
   * reaches the host at http://host.docker.internal:PORT).
   */
  constructor(
    private readonly listen: { host: string; port: number },
    private readonly publicUrl?: string,
    private readonly maxBytes = MAX_WEBHOOK_BYTES,
  ) {}

  async start(): Promise<void> {
    const server = http.createServer((req, res) => this.receive(req, res));
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(this.listen.port, this.listen.host, () => resolve());
    });
    this.server = server;
    const { address, port } = server.address() as AddressInfo;
    const host = address.includes(':') ? `[${address}]` : address;
    this.base = (this.publicUrl ?? `http://${host === '0.0.0.0' || host === '[::]' ? '127.0.0.1' : host}:${port}`).replace(/\/+$/, '');
  }

  /** The webhook URL of prediction `id`; `handler` gets each of its reports until `off`. */
  on(id: string, handler: WebhookHandler): string {
    this.handlers.set(id, handler);
    return `${this.base}/${this.secret}/${encodeURIComponent(id)}`;
  }

  off(id: string): void {
    this.handlers.delete(id);
  }

  async close(): Promise<void> {
    const server = this.server;
    this.server = null;
    if (!server) return;
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  }

  private receive(req: http.IncomingMessage, res: http.ServerResponse): void {
    const parts = (req.url ?? '').split('?')[0].split('/');
    const handler = req.method === 'POST' && parts.length === 3 && parts[1] === this.secret ? this.handlers.get(decodeURIComponent(parts[2])) : undefined;
    if (!handler) {
      req.resume();
      res.writeHead(req.method === 'POST' ? 404 : 405).end();
      return;
    }
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size - c.length > this.maxBytes) return;
      if (size > this.maxBytes) {
        chunks.length = 0;
        res.writeHead(413, { connection: 'close' }).end();
        handler(new WebhookTooLarge(`a webhook report of the prediction is over ${this.maxBytes} bytes`));
      } else chunks.push(c);
    });
    req.on('end', () => {
      if (size > this.maxBytes) return;
      let body: unknown;
      try {
        body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
      } catch {
        res.writeHead(400).end();
        return;
      }
      res.writeHead(200).end();
      if (typeof body === 'object' && body !== null && !Array.isArray(body)) handler(body as Record<string, unknown>);
    });
  }
}
