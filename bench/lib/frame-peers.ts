import { randomBytes } from 'node:crypto';
import WebSocket from 'ws';
import { PIPELINE_HEADER_BYTES, writePipelineHeader } from '../../sdk/protocol/index.js';

/**
 * One end of an activation path as the ranks benchmark drives it: a socket that sends binary
 * frames (a 32-byte pipeline header, then the payload) and hands over the ones it receives.
 * The gateway's rank worker and the bare relay's client send the same bytes, so the two paths
 * carry identical traffic.
 */
export interface FramePeer {
  readonly ws: WebSocket;
  /**
   * Writes this peer's next header (its lease, fence and seq) into the first 32 bytes of `frame`
   * and sends it; `written` runs once the socket took it. `ws` masks a copy, so the caller may
   * reuse `frame` at once.
   */
  send(frame: Buffer, written?: (err?: Error) => void): void;
  /** Every binary message received, whole (header included). */
  onFrame: (data: Buffer) => void;
  close(): void;
}

/**
 * A frame of `payloadBytes` random bytes after the header (its header written at each send):
 * activations are tensors of fp16 or fp32 numbers, which look like noise to anything that reads
 * them as text (a frame of one repeated letter would be valid UTF-8, and cheap to decode by mistake).
 */
export const frameOf = (payloadBytes: number): Buffer => Buffer.concat([Buffer.alloc(PIPELINE_HEADER_BYTES), randomBytes(payloadBytes)]);

const wsUrl = (url: string) => url.replace(/^http/, 'ws');

async function opened(ws: WebSocket): Promise<void> {
  await new Promise<void>((resolve, reject) => {
    ws.once('open', () => resolve());
    ws.once('error', reject);
  });
}

/** A client of bench/servers/bare-frame-relay.ts, on side `a` or `b`; its header's lease is fixed. */
export class RelayPeer implements FramePeer {
  readonly ws: WebSocket;
  onFrame: (data: Buffer) => void = () => {};
  private seq = 0;

  private constructor(url: string, side: 'a' | 'b') {
    this.ws = new WebSocket(`${wsUrl(url)}/${side}`);
    this.ws.on('message', (data: Buffer, isBinary) => isBinary && this.onFrame(data));
  }

  static async connect(url: string, side: 'a' | 'b'): Promise<RelayPeer> {
    const peer = new RelayPeer(url, side);
    await opened(peer.ws);
    return peer;
  }

  send(frame: Buffer, written?: (err?: Error) => void): void {
    writePipelineHeader(frame, `lse_${'0'.repeat(32)}`, 1, ++this.seq, false);
    this.ws.send(frame, { binary: true }, written);
  }

  close(): void {
    this.ws.terminate();
  }
}

type Json = Record<string, any> & { type: string };

/**
 * A rank worker speaking protocol 6 by hand (docs/worker-protocol.md, "Ranks (protocol 6)"),
 * reduced to what the benchmark needs: it registers one rank of a model, heartbeats its lease,
 * and sends and receives the lease's frames without keeping them (test/helpers/rank-worker.ts
 * keeps every payload, which a run of hundreds of megabytes cannot).
 */
export class RankPeer implements FramePeer {
  readonly ws: WebSocket;
  onFrame: (data: Buffer) => void = () => {};
  lease?: Json;
  private seq = 0;
  private heartbeat?: NodeJS.Timeout;
  private readonly waiters: Array<{ match: (f: Json) => boolean; resolve: (f: Json) => void }> = [];

  private constructor(url: string, token: string) {
    this.ws = new WebSocket(`${wsUrl(url)}/v1/workers/connect`, { headers: { authorization: `Bearer ${token}` } });
    this.ws.on('message', (data: Buffer, isBinary) => (isBinary ? this.onFrame(data) : this.json(JSON.parse(data.toString()) as Json)));
    this.ws.on('close', () => clearInterval(this.heartbeat));
  }

  static async connect(o: { url: string; token: string; kind: string; model: string; index: number; count: number }): Promise<RankPeer> {
    const peer = new RankPeer(o.url, o.token);
    await opened(peer.ws);
    const answer = peer.next((f) => f.type === 'registered' || f.type === 'error');
    peer.ws.send(JSON.stringify({ type: 'register', protocol: [6], kinds: [o.kind], tier: 'open', slots: 1, models: { [o.kind]: [{ id: o.model, rank: { index: o.index, count: o.count } }] } }));
    const registered = await answer;
    if (registered.type === 'error') throw new Error(`rank ${o.index} refused: ${registered.message}`);
    peer.heartbeat = setInterval(() => {
      if (peer.ws.readyState === WebSocket.OPEN) peer.ws.send(JSON.stringify({ type: 'heartbeat', leases: peer.lease ? [peer.lease.lease_id] : [] }));
    }, registered.heartbeat_ms);
    return peer;
  }

  /** The next JSON frame that matches. */
  next(match: (f: Json) => boolean, timeoutMs = 30_000): Promise<Json> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('timed out waiting for the gateway')), timeoutMs);
      this.waiters.push({ match, resolve: (f) => (clearTimeout(timer), resolve(f)) });
    });
  }

  send(frame: Buffer, written?: (err?: Error) => void): void {
    const lease = this.lease!;
    writePipelineHeader(frame, lease.lease_id, lease.fence, ++this.seq, false);
    this.ws.send(frame, { binary: true }, written);
  }

  close(): void {
    clearInterval(this.heartbeat);
    this.ws.terminate();
  }

  private json(frame: Json): void {
    if (frame.type === 'lease') this.lease = frame;
    // A refusal of a frame, or the pipeline's end, would make the run's figures meaningless.
    if (frame.type === 'cancel' || (frame.type === 'error' && frame.of === 'frame')) console.error(`ranks: rank worker told ${JSON.stringify(frame)}`);
    for (let i = this.waiters.length - 1; i >= 0; i--) {
      if (this.waiters[i].match(frame)) this.waiters.splice(i, 1)[0].resolve(frame);
    }
  }
}
