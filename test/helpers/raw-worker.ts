import WebSocket from 'ws';

export type Frame = Record<string, any> & { type: string };

/**
 * A worker speaking the wire protocol by hand (docs/worker-protocol.md), so dispatch tests
 * see exactly the frames the gateway sends and can send any frame back, well-formed or not.
 */
export class RawWorker {
  readonly frames: Frame[] = [];
  private waiters: Array<{ match: (f: Frame) => boolean; resolve: (f: Frame) => void }> = [];
  ws!: WebSocket;
  workerId = '';
  closed: Promise<{ code: number; reason: string }> = new Promise(() => {});

  private heartbeat?: NodeJS.Timeout;

  /**
   * `heartbeats: false` makes a worker that goes silent, for the missed-heartbeat case.
   * `attest`: a private worker's answer to each `attest` nonce (the evidence to send, or null to stay silent).
   */
  constructor(readonly gatewayUrl: string, readonly token: string, readonly opts: { heartbeats?: boolean; attest?: (nonce: string) => Promise<unknown> } = {}) {}

  /** Connects and registers; rejects with the refusal if the gateway says no. */
  async connect(register: Partial<Frame> = {}): Promise<this> {
    this.ws = new WebSocket(`${this.gatewayUrl.replace(/^http/, 'ws')}/v1/workers/connect`, { headers: { authorization: `Bearer ${this.token}` } });
    this.closed = new Promise((resolve) => this.ws.on('close', (code, reason) => resolve({ code, reason: reason.toString() })));
    this.ws.on('message', (data) => {
      const frame = JSON.parse(data.toString()) as Frame;
      this.frames.push(frame);
      if (frame.type === 'attest' && this.opts.attest) {
        void this.opts.attest(frame.nonce).then((evidence) => {
          if (evidence && this.ws.readyState === WebSocket.OPEN) this.send({ type: 'attestation', evidence });
        });
      }
      const i = this.waiters.findIndex((w) => w.match(frame));
      if (i >= 0) this.waiters.splice(i, 1)[0].resolve(frame);
    });
    await new Promise<void>((resolve, reject) => {
      this.ws.once('open', () => resolve());
      this.ws.once('unexpected-response', (_req, res) => reject(new Error(`upgrade refused: ${res.statusCode}`)));
      this.ws.once('error', reject);
    });
    this.send({ type: 'register', protocol: [1], kinds: ['all'], tier: 'open', slots: 1, ...register });
    const answer = await this.next((f) => f.type === 'registered' || f.type === 'error');
    if (answer.type === 'error') throw Object.assign(new Error(answer.message), { frame: answer });
    this.workerId = answer.worker_id;
    if (this.opts.heartbeats !== false) {
      this.heartbeat = setInterval(() => {
        if (this.ws.readyState === WebSocket.OPEN) this.send({ type: 'heartbeat', leases: this.leases().map((l) => l.lease_id) });
      }, answer.heartbeat_ms);
      this.ws.on('close', () => clearInterval(this.heartbeat));
    }
    return this;
  }

  send(frame: unknown): void {
    this.ws.send(typeof frame === 'string' ? frame : JSON.stringify(frame));
  }

  /** The next frame (already received or still to come) that matches; fails after `timeoutMs`. */
  next(match: (f: Frame) => boolean, timeoutMs = 10_000): Promise<Frame> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('timed out waiting for a frame')), timeoutMs);
      this.waiters.push({
        match,
        resolve: (f) => {
          clearTimeout(timer);
          resolve(f);
        },
      });
    });
  }

  /** The next lease not yet consumed. */
  private consumed = new Set<Frame>();
  async lease(timeoutMs = 10_000): Promise<Frame> {
    const ready = this.frames.find((f) => f.type === 'lease' && !this.consumed.has(f));
    const frame = ready ?? (await this.next((f) => f.type === 'lease' && !this.consumed.has(f), timeoutMs));
    this.consumed.add(frame);
    return frame;
  }

  leases(): Frame[] {
    return this.frames.filter((f) => f.type === 'lease');
  }

  /** Sends a lease report and waits for its ack or error. */
  async report(lease: Frame, frame: Frame): Promise<Frame> {
    const answer = this.next((f) => (f.type === 'ack' || f.type === 'error') && f.lease_id === lease.lease_id);
    this.send({ lease_id: lease.lease_id, fence: lease.fence, ...frame });
    return answer;
  }

  complete(lease: Frame, urls: string[] = []): Promise<Frame> {
    return this.report(lease, { type: 'complete', output: { urls } });
  }

  close(): void {
    this.ws.close();
  }

  /** Drops the TCP connection without a close handshake, as a crashed machine would. */
  terminate(): void {
    this.ws.terminate();
  }
}
