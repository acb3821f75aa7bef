import net, { type AddressInfo } from 'node:net';

/**
 * Which events connections the proxy cuts: the first one only, each one sent without
 * Last-Event-ID (so a stream is cut once, however many tests use the proxy, since its
 * reconnect carries the header), or none (it only watches).
 */
export type CutWhich = 'first' | 'fresh' | 'none';

/**
 * A TCP proxy in front of the gateway that cuts SSE connections (`GET /v1/jobs/{id}/events`) in
 * the middle of their first `progress` frame: the bytes before it pass, then both sockets are
 * destroyed. It records the events requests it saw, for tests of a client's resumption.
 */
export class CuttingProxy {
  cuts = 0;
  eventConnections = 0;
  /** The request head of each events connection, lower-cased. */
  readonly eventRequests: string[] = [];
  /** Client sockets that carried an events request and are still open. */
  readonly openEvents = new Set<net.Socket>();
  private readonly open = new Set<net.Socket>();
  private readonly server = net.createServer((client) => this.pipe(client));

  constructor(
    private readonly targetPort: number,
    private readonly which: CutWhich,
  ) {}

  async start(): Promise<string> {
    await new Promise<void>((r) => this.server.listen(0, '127.0.0.1', () => r()));
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  private pipe(client: net.Socket): void {
    const upstream = net.connect(this.targetPort, '127.0.0.1');
    this.open.add(client);
    client.once('close', () => (this.open.delete(client), this.openEvents.delete(client)));
    let armed = false;
    let seen = ''; // latin1, so string offsets are byte offsets
    client.on('data', (d: Buffer) => {
      const text = d.toString('latin1');
      if (/^GET \/v1\/jobs\/[^ ]+\/events/.test(text)) {
        const head = text.split('\r\n\r\n')[0].toLowerCase();
        this.eventConnections++;
        this.eventRequests.push(head);
        if (!client.destroyed) this.openEvents.add(client);
        armed = this.which === 'fresh' ? !head.includes('\r\nlast-event-id:') : this.which === 'first' && this.cuts === 0;
      }
      upstream.write(d);
    });
    upstream.on('data', (d: Buffer) => {
      if (!armed || (this.which === 'first' && this.cuts > 0)) return void client.write(d);
      const before = seen.length;
      seen += d.toString('latin1');
      const at = seen.indexOf('event: progress');
      if (at < 0) return void client.write(d);
      armed = false;
      this.cuts++;
      client.write(d.subarray(0, Math.max(0, at + 8 - before)), () => {
        client.destroy();
        upstream.destroy();
      });
    });
    client.on('error', () => upstream.destroy());
    upstream.on('error', () => client.destroy());
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
  }

  async stop(): Promise<void> {
    for (const s of this.open) s.destroy();
    await new Promise<void>((r) => this.server.close(() => r()));
  }
}
