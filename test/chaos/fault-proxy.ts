import net, { type AddressInfo } from 'node:net';

/** What the proxy does to the link now. */
export type LinkMode = 'up' | 'cut' | 'delay' | 'blackhole';

/**
 * A TCP proxy the chaos harness controls, between one party (a worker, a client) and the
 * gateways. Each new connection goes to the first target that accepts it, as a load balancer
 * would. The link can be cut (connections reset, new ones refused), delayed (every chunk held
 * `delayMs` each way), or blackholed (connections accepted and kept, nothing passes either way:
 * what a partition looks like to a peer that only learns of it from missing heartbeats).
 */
export class FaultProxy {
  private readonly server = net.createServer((client) => this.accept(client));
  private readonly sockets = new Set<net.Socket>();
  mode: LinkMode = 'up';
  delayMs = 0;
  /** Connections reset by `cut` or `dropAll` so far. */
  drops = 0;
  /**
   * A fault of a proxy between SSE clients and the gateway (sabotage only): each chunk that
   * carries a progress frame is sent twice, or held and sent after the chunk behind it.
   */
  sseTamper: 'duplicate' | 'reorder' | null = null;
  private held: { chunk: Buffer; to: net.Socket } | null = null;

  constructor(public targets: () => number[]) {}

  async listen(): Promise<this> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', () => resolve()));
    return this;
  }

  get port(): number {
    return (this.server.address() as AddressInfo).port;
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  /** Sets the link's mode; `cut` and `blackhole` also reset the connections open now. */
  set(mode: LinkMode, delayMs = 0): void {
    this.mode = mode;
    this.delayMs = delayMs;
    if (mode === 'cut' || mode === 'blackhole') this.dropAll();
  }

  /** Resets every open connection but keeps accepting new ones: a flap, not an outage. */
  dropAll(): void {
    for (const s of this.sockets) {
      this.drops++;
      s.destroy();
    }
  }

  async close(): Promise<void> {
    this.dropAll();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private track(socket: net.Socket): void {
    this.sockets.add(socket);
    socket.once('close', () => this.sockets.delete(socket));
    socket.on('error', () => socket.destroy());
  }

  private accept(client: net.Socket): void {
    if (this.mode === 'cut') return void client.destroy();
    this.track(client);
    client.pause();
    this.connect(client, this.targets(), 0);
  }

  private connect(client: net.Socket, targets: number[], index: number): void {
    const port = targets[index];
    if (port === undefined || client.destroyed) return void client.destroy();
    const upstream = net.connect(port, '127.0.0.1');
    let connected = false;
    upstream.on('error', () => {
      upstream.destroy();
      if (!connected) this.connect(client, targets, index + 1);
      else client.destroy();
    });
    upstream.once('connect', () => {
      connected = true;
      this.track(upstream);
      client.once('close', () => upstream.destroy());
      upstream.once('close', () => client.destroy());
      this.relay(client, upstream, false);
      this.relay(upstream, client, true);
      client.resume();
    });
  }

  /** Forwards `from` to `to` through the link's current mode (checked per chunk). */
  private relay(from: net.Socket, to: net.Socket, downstream: boolean): void {
    from.on('data', (chunk: Buffer) => {
      if (this.mode === 'blackhole') return; // swallowed: the peer waits for bytes that never come
      if (downstream && this.tamperSse(chunk, to)) return;
      if (this.mode === 'delay' && this.delayMs > 0) {
        // Held chunks leave in order: each timer is as long as the one before it.
        from.pause();
        setTimeout(() => {
          if (!to.destroyed) to.write(chunk);
          from.resume();
        }, this.delayMs);
        return;
      }
      if (!to.destroyed) to.write(chunk);
    });
  }

  /** Applies `sseTamper` to a chunk bound for a client; true when it took care of the chunk. */
  private tamperSse(chunk: Buffer, to: net.Socket): boolean {
    const held = this.held;
    if (held && held.to === to) {
      this.held = null;
      to.write(chunk);
      to.write(held.chunk);
      return true;
    }
    // A frame of a progress event: the run is not over, so more frames follow on this connection.
    if (!this.sseTamper || !/\nevent: progress\n/.test(chunk.toString('latin1'))) return false;
    if (this.sseTamper === 'duplicate') {
      to.write(chunk);
      to.write(chunk);
    } else {
      this.held = { chunk, to };
    }
    return true;
  }
}
