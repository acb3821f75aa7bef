import { createHash, randomBytes } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import WebSocket, { WebSocketServer, type RawData } from 'ws';
import { decodePipelineFrame, encodePipelineFrame, writePipelineHeader, type PipelineFrame } from '../../sdk/protocol/index.js';
import { until } from './harness.js';

export type Frame = Record<string, any>;

/** One rank lease of a pipeline, as the relay handed it out and follows it. */
export interface RankLease {
  frame: Frame;
  /** Index of the worker (in connection order) holding it. */
  worker: number;
  /** The seq of the last frame this rank sent, and of the last one the relay sent it. */
  sentSeq: number;
  receivedSeq: number;
  /** Its complete or fail came, or it was sent `cancel`: the lease is over. */
  over: boolean;
}

export interface Pipeline {
  id: string;
  runId: string;
  ranks: RankLease[];
}

/** A pipeline frame a worker sent, decoded, with where it came from. */
export interface RelayedFrame {
  pipeline: string;
  rank: number;
  frame: PipelineFrame;
}

/**
 * A gateway end for rank workers, scripted after docs/worker-protocol.md, "Ranks (protocol 6)":
 * it answers `register` with `registered` (protocol 6), hands out the rank leases of a pipeline,
 * relays each binary frame from rank i to rank i+1 (the last rank's to rank 0) with the header
 * rewritten to the receiver's lease id and the receiver's own seq, acks every report, stores
 * uploads, and ends the pipeline (`cancel`, reason `pipeline_ended`, to the ranks still running)
 * when the last rank completes or any rank fails. Everything is recorded for the tests to read.
 */
export class RankRelayGateway {
  url = '';
  readonly sockets: WebSocket[] = [];
  readonly registers: Frame[] = [];
  /** Every text frame from a worker but heartbeats, with the worker's index. */
  readonly reports: Array<Frame & { worker: number }> = [];
  readonly relayed: RelayedFrame[] = [];
  /** Frames a worker sent out of seq order, or after its end: the real gateway breaks the pipeline on them. */
  readonly violations: string[] = [];
  readonly uploads = new Map<string, Buffer>();
  readonly pipelines: Pipeline[] = [];
  /** Raw binary messages per worker, as they arrived (before any relaying). */
  readonly binary: Array<{ worker: number; data: Buffer }> = [];
  /** Whether to relay frames at all (tests that script the frames themselves turn it off). */
  relay = true;
  private server!: http.Server;
  private wss!: WebSocketServer;
  private readonly ended = new Set<string>();

  async start(): Promise<this> {
    this.server = http.createServer((req, res) => this.upload(req, res));
    this.wss = new WebSocketServer({ server: this.server, path: '/v1/workers/connect' });
    await new Promise<void>((r) => this.server.listen(0, '127.0.0.1', () => r()));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    this.wss.on('connection', (ws) => {
      const worker = this.sockets.push(ws) - 1;
      ws.on('message', (data: RawData, isBinary) => {
        const buf = Array.isArray(data) ? Buffer.concat(data) : Buffer.from(data as Buffer);
        if (isBinary) return this.onBinary(worker, buf);
        const frame = JSON.parse(buf.toString('utf8')) as Frame;
        if (frame.type === 'register') {
          this.registers[worker] = frame;
          return ws.send(JSON.stringify({ type: 'registered', worker_id: `wrk_${worker}`, protocol: 6, heartbeat_ms: 5_000, lease_ttl_ms: 30_000, resumed: [], lost: [] }));
        }
        if (frame.type === 'heartbeat') return;
        this.reports.push({ ...frame, worker });
        if (typeof frame.lease_id !== 'string') return;
        ws.send(JSON.stringify({ type: 'ack', lease_id: frame.lease_id, of: frame.type }));
        if (frame.type === 'complete' || frame.type === 'fail') this.onFinal(frame);
      });
    });
    return this;
  }

  /** Resolves once `n` workers have registered. */
  async workers(n: number): Promise<void> {
    await until(`${n} registered workers`, async () => this.registers.filter(Boolean).length >= n, 60_000);
  }

  /**
   * Leases a job as one pipeline: rank r to worker `workers[r]` (its index in connection order). Only rank 0 gets `input`; the
   * leases share run, attempt and fence, each has its own lease id and upload token.
   */
  pipeline(opts: { kind: string; model: string; input: Frame; workers: number[]; fence?: number; deliver?: number[] }): Pipeline {
    const id = `pip_${randomBytes(8).toString('hex')}`;
    const runId = `run_${randomBytes(8).toString('hex')}`;
    const count = opts.workers.length;
    const ranks = opts.workers.map((worker, index): RankLease => {
      const leaseId = `lse_${randomBytes(16).toString('hex')}`;
      const frame = {
        type: 'lease',
        lease_id: leaseId,
        fence: opts.fence ?? 1,
        run_id: runId,
        kind: opts.kind,
        tier: 'open',
        attempt: 1,
        input: index === 0 ? opts.input : {},
        upload_token: `tok_${leaseId}`,
        upload_url: `${this.url}/upload/${leaseId}`,
        rank: { index, count, pipeline_id: id, model: opts.model, workers: opts.workers.map((w) => `wrk_${w}`) },
      };
      return { frame, worker, sentSeq: 0, receivedSeq: 0, over: false };
    });
    const pipeline = { id, runId, ranks };
    this.pipelines.push(pipeline);
    // `deliver`: only these ranks' leases go out (a test playing the other ranks itself).
    for (const [index, r] of ranks.entries()) if (!opts.deliver || opts.deliver.includes(index)) this.sockets[r.worker].send(JSON.stringify(r.frame));
    return pipeline;
  }

  /** The reports of one lease, in order. */
  reportsOf(leaseId: string): Frame[] {
    return this.reports.filter((f) => f.lease_id === leaseId);
  }

  /** The final report (complete or fail) of a lease, once it came. */
  final(leaseId: string): Frame | undefined {
    return this.reportsOf(leaseId).find((f) => f.type === 'complete' || f.type === 'fail');
  }

  /** Sends a pipeline frame to a worker as the gateway would: addressed to the receiver's lease. */
  sendFrame(worker: number, frame: PipelineFrame): void {
    this.sockets[worker].send(encodePipelineFrame(frame));
  }

  send(worker: number, frame: Frame): void {
    this.sockets[worker].send(JSON.stringify(frame));
  }

  /**
   * Resolves once the worker has read everything sent to it before: a ping goes behind those
   * frames, and the worker's socket answers it only after its message handlers ran for them.
   */
  async barrier(worker: number): Promise<void> {
    const ws = this.sockets[worker];
    const token = randomBytes(8);
    await new Promise<void>((resolve) => {
      const onPong = (data: Buffer) => {
        if (!data.equals(token)) return;
        ws.off('pong', onPong);
        resolve();
      };
      ws.on('pong', onPong);
      ws.ping(token);
    });
  }

  async stop(): Promise<void> {
    for (const ws of this.wss.clients) ws.terminate();
    await new Promise<void>((r) => this.wss.close(() => r()));
    this.server.closeAllConnections();
    await new Promise<void>((r) => this.server.close(() => r()));
  }

  private find(leaseId: string): { pipeline: Pipeline; rank: number } | undefined {
    for (const pipeline of this.pipelines) {
      const rank = pipeline.ranks.findIndex((r) => r.frame.lease_id === leaseId);
      if (rank >= 0) return { pipeline, rank };
    }
    return undefined;
  }

  private onBinary(worker: number, data: Buffer): void {
    this.binary.push({ worker, data });
    const frame = decodePipelineFrame(data);
    const found = this.find(frame.leaseId);
    if (!found || found.pipeline.ranks[found.rank].worker !== worker) {
      this.sockets[worker].send(JSON.stringify({ type: 'error', code: 'stale_lease', of: 'frame', lease_id: frame.leaseId, message: 'not a rank lease of this worker' }));
      return;
    }
    const { pipeline, rank } = found;
    const sender = pipeline.ranks[rank];
    this.relayed.push({ pipeline: pipeline.id, rank, frame: { ...frame, payload: Buffer.from(frame.payload) } });
    if (this.ended.has(`${frame.leaseId}`)) this.violations.push(`rank ${rank} sent frame ${frame.seq} after its end`);
    if (frame.seq !== sender.sentSeq + 1) this.violations.push(`rank ${rank} sent frame ${frame.seq} after ${sender.sentSeq}`);
    sender.sentSeq = frame.seq;
    if (frame.end) this.ended.add(frame.leaseId);
    if (!this.relay) return;
    const receiver = pipeline.ranks[(rank + 1) % pipeline.ranks.length];
    const out = Buffer.from(data);
    writePipelineHeader(out, receiver.frame.lease_id, receiver.frame.fence, ++receiver.receivedSeq, frame.end);
    const ws = this.sockets[receiver.worker];
    if (ws.readyState === WebSocket.OPEN) ws.send(out);
  }

  /** The last rank's complete is the run's; a fail from any rank ends the pipeline too. */
  private onFinal(frame: Frame): void {
    const found = this.find(frame.lease_id);
    if (!found) return;
    const { pipeline, rank } = found;
    pipeline.ranks[rank].over = true;
    const last = rank === pipeline.ranks.length - 1;
    if (!last && frame.type === 'complete') return;
    const message = frame.type === 'complete' ? 'the last rank completed the run' : `rank ${rank} failed: ${frame.error?.message}`;
    for (const r of pipeline.ranks) {
      if (r.over) continue;
      r.over = true;
      this.send(r.worker, { type: 'cancel', lease_id: r.frame.lease_id, run_id: pipeline.runId, reason: 'pipeline_ended', message });
    }
  }

  /** `POST /upload/<lease_id>?name=...` with the lease's upload token, as the gateway stores an artifact. */
  private upload(req: http.IncomingMessage, res: http.ServerResponse): void {
    const url = new URL(req.url ?? '/', this.url);
    const leaseId = url.pathname.split('/')[2] ?? '';
    if (req.method !== 'POST' || req.headers.authorization !== `Bearer tok_${leaseId}`) return void res.writeHead(401, { 'content-type': 'application/json' }).end('{"error":{"code":"unauthorized","message":"a live lease\'s upload_token is required"}}');
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      const name = url.searchParams.get('name') ?? 'file';
      this.uploads.set(`${leaseId}/${name}`, body);
      const sha256 = createHash('sha256').update(body).digest('hex');
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ url: `${this.url}/artifacts/${leaseId}/${name}`, sha256, size: body.length, content_type: String(req.headers['content-type'] ?? '') }));
    });
  }
}
