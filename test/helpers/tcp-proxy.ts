import net from 'node:net';
import type { AddressInfo } from 'node:net';

/**
 * A TCP proxy for tests: a load balancer in front of gateway instances, or a cable to Redis
 * that a test can cut. Each new connection goes to the first target that accepts it (a
 * target that stopped listening is skipped, as a load balancer skips a refused upstream);
 * an established connection stays with its target until either side closes it.
 */
export class TcpProxy {
  private readonly server = net.createServer({ allowHalfOpen: true }, (client) => this.accept(client));
  private readonly pairs = new Set<net.Socket>();
  /** Ports tried in order for each new connection. */
  targets: number[];
  /** Where each accepted connection went, in order (for assertions on routing). */
  readonly routed: number[] = [];
  private cut = false;

  constructor(targets: number[] = [], readonly host = '127.0.0.1') {
    this.targets = targets;
  }

  async listen(port = 0): Promise<this> {
    await new Promise<void>((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(port, this.host, () => resolve());
    });
    return this;
  }

  get port(): number {
    return (this.server.address() as AddressInfo).port;
  }

  get url(): string {
    return `http://${this.host}:${this.port}`;
  }

  /** Drops every connection and refuses new ones, as a failed link would, until `restore`. */
  cutAll(): void {
    this.cut = true;
    for (const s of this.pairs) s.destroy();
  }

  restore(): void {
    this.cut = false;
  }

  async close(): Promise<void> {
    this.cutAll();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private accept(client: net.Socket): void {
    if (this.cut) return void client.destroy();
    client.pause();
    this.track(client);
    client.on('error', () => client.destroy());
    this.connect(client, 0);
  }

  private connect(client: net.Socket, index: number): void {
    const port = this.targets[index];
    if (port === undefined || client.destroyed) return void client.destroy();
    const upstream = net.connect({ port, host: this.host, allowHalfOpen: true });
    let connected = false;
    upstream.on('error', () => {
      upstream.destroy();
      // Refused: the next target may take it. Once relaying, the client's connection fails too.
      if (!connected) this.connect(client, index + 1);
      else client.destroy();
    });
    upstream.once('connect', () => {
      connected = true;
      if (this.cut) return void (upstream.destroy(), client.destroy());
      this.routed.push(port);
      this.track(upstream);
      client.on('close', (hadError) => hadError && upstream.destroy());
      upstream.on('close', (hadError) => hadError && client.destroy());
      // Ends (and half-closes) pass through; nothing written is dropped.
      client.pipe(upstream);
      upstream.pipe(client);
      client.resume();
    });
  }

  private track(socket: net.Socket): void {
    this.pairs.add(socket);
    socket.once('close', () => this.pairs.delete(socket));
  }
}
