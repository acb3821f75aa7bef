import WebSocket from 'ws';
import { RankedLlmStage, readTokenFrame, promptFrame } from '../../sdk/engines/demo/ranked-llm.js';
import { detokenize, END_TOKEN, tokenize } from '../../sdk/engines/demo/ranked-vocab.js';
import { decodePipelineFrame, encodePipelineFrame } from '../../sdk/protocol/index.js';

export type Frame = Record<string, any> & { type: string };

/** One rank lease as the raw rank worker holds it. */
export interface HeldRank {
  lease: Frame;
  seq: number;
  /** Payloads received, in order, and whether the end frame came. */
  received: Buffer[];
  ended: boolean;
  /** Set when a handler is done (it completed or was told to stop). */
  over: boolean;
}

export interface RankWorkerOptions {
  tier?: 'open' | 'trusted' | 'private';
  index: number;
  count: number;
  model?: string;
  kind?: string;
  slots?: number;
  /** Run the demo LLM stage on every lease (default); false: the test drives the lease by hand. */
  auto?: boolean;
  /** Stops answering after this many incoming frames of a lease (a rank stuck mid-job). */
  stallAfter?: number;
  /** More fields of `register` (a private worker's `receipt_key`). */
  register?: Record<string, unknown>;
  /** A private worker's evidence for each `attest` nonce. */
  attest?: (nonce: string) => Promise<unknown>;
  /** The receipt the last rank completes with (a private run's), given its lease and worker id. */
  receipt?: (lease: Frame, workerId: string) => Promise<string>;
}

/**
 * A rank worker speaking protocol 6 by hand (docs/worker-protocol.md, "Ranks"), running one
 * stage of demo-ranked-llm: so gateway tests see exactly what goes over the socket, JSON and
 * binary, and can break the protocol on purpose (stale frames, silence, a socket never read).
 */
export class RankWorker {
  readonly json: Frame[] = [];
  readonly held = new Map<string, HeldRank>();
  ws!: WebSocket;
  workerId = '';
  private waiters: Array<{ match: (f: Frame) => boolean; resolve: (f: Frame) => void }> = [];
  private heartbeat?: NodeJS.Timeout;
  private readonly stage: RankedLlmStage;

  constructor(
    readonly gatewayUrl: string,
    readonly token: string,
    readonly opts: RankWorkerOptions,
  ) {
    this.stage = new RankedLlmStage(opts.index, opts.count);
  }

  get kind(): string {
    return this.opts.kind ?? 'inference:llm:text-generate';
  }

  async connect(): Promise<this> {
    this.ws = new WebSocket(`${this.gatewayUrl.replace(/^http/, 'ws')}/v1/workers/connect`, { headers: { authorization: `Bearer ${this.token}` } });
    this.ws.on('message', (data, isBinary) => (isBinary ? this.binary(data as Buffer) : this.text(JSON.parse(data.toString()) as Frame)));
    await new Promise<void>((resolve, reject) => {
      this.ws.once('open', () => resolve());
      this.ws.once('error', reject);
    });
    const { index, count } = this.opts;
    this.send({
      type: 'register',
      protocol: [6],
      kinds: [this.kind],
      tier: this.opts.tier ?? 'open',
      slots: this.opts.slots ?? 1,
      models: { [this.kind]: [{ id: this.opts.model ?? 'demo-ranked-llm', rank: { index, count } }] },
      ...this.opts.register,
    });
    const answer = await this.next((f) => f.type === 'registered' || f.type === 'error');
    if (answer.type === 'error') throw Object.assign(new Error(answer.message), { frame: answer });
    this.workerId = answer.worker_id;
    this.heartbeat = setInterval(() => {
      if (this.ws.readyState === WebSocket.OPEN) this.send({ type: 'heartbeat', leases: [...this.held.keys()] });
    }, answer.heartbeat_ms);
    this.ws.on('close', () => clearInterval(this.heartbeat));
    return this;
  }

  send(frame: unknown): void {
    this.ws.send(JSON.stringify(frame));
  }

  /** The next JSON frame (already received or to come) that matches. */
  next(match: (f: Frame) => boolean, timeoutMs = 15_000): Promise<Frame> {
    const seen = this.json.find(match);
    if (seen) return Promise.resolve(seen);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`worker rank ${this.opts.index}: timed out waiting for a frame`)), timeoutMs);
      this.waiters.push({ match, resolve: (f) => (clearTimeout(timer), resolve(f)) });
    });
  }

  /** Sends a pipeline frame for a held lease (the next seq unless told otherwise). */
  frame(leaseId: string, payload: Uint8Array, end = false, over: { fence?: number; seq?: number } = {}): void {
    const held = this.held.get(leaseId);
    const seq = over.seq ?? (held ? ++held.seq : 1);
    this.ws.send(encodePipelineFrame({ leaseId, fence: over.fence ?? held?.lease.fence ?? 0, seq, end, payload }));
  }

  /** The rank leases this worker was sent, in order. */
  leases(): Frame[] {
    return this.json.filter((f) => f.type === 'lease');
  }

  /** Reports on a lease and waits for its answer. */
  async report(leaseId: string, frame: Frame): Promise<Frame> {
    const held = this.held.get(leaseId)!;
    const answer = this.nextNew((f) => (f.type === 'ack' || f.type === 'error') && f.lease_id === leaseId && f.of === frame.type);
    this.send({ lease_id: leaseId, fence: held.lease.fence, ...frame });
    return answer;
  }

  terminate(): void {
    this.ws.terminate();
  }

  close(): void {
    clearInterval(this.heartbeat);
    if (this.ws.readyState === WebSocket.OPEN) this.ws.close();
  }

  private nextNew(match: (f: Frame) => boolean): Promise<Frame> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('timed out waiting for an answer')), 15_000);
      this.waiters.push({ match, resolve: (f) => (clearTimeout(timer), resolve(f)) });
    });
  }

  private text(frame: Frame): void {
    this.json.push(frame);
    if (frame.type === 'attest' && this.opts.attest) {
      void this.opts.attest(frame.nonce).then((evidence) => this.send({ type: 'attestation', nonce: frame.nonce, evidence }));
    }
    if (frame.type === 'lease') {
      this.held.set(frame.lease_id, { lease: frame, seq: 0, received: [], ended: false, over: false });
      if (this.opts.auto !== false) this.started(frame.lease_id);
    }
    if (frame.type === 'cancel') {
      const held = this.held.get(frame.lease_id);
      if (held) held.over = true;
      if (frame.reason !== 'pipeline_ended' && held) void this.report(frame.lease_id, { type: 'fail', error: { code: 'canceled', message: 'canceled', retryable: false } });
    }
    for (let i = this.waiters.length - 1; i >= 0; i--) {
      if (this.waiters[i].match(frame)) this.waiters.splice(i, 1)[0].resolve(frame);
    }
  }

  private binary(data: Buffer): void {
    const f = decodePipelineFrame(data);
    const held = this.held.get(f.leaseId);
    if (!held) return;
    held.received.push(Buffer.from(f.payload));
    if (f.end) held.ended = true;
    if (this.opts.stallAfter !== undefined && held.received.length > this.opts.stallAfter) return;
    if (this.opts.auto !== false && !held.over) this.step(f.leaseId, Buffer.from(f.payload), f.end);
  }

  /** Rank 0 starts the generation from the prompt. */
  private started(leaseId: string): void {
    if (this.opts.index !== 0) return;
    const input = this.held.get(leaseId)!.lease.input;
    this.frame(leaseId, this.stage.forward(promptFrame(tokenize(String(input.prompt ?? '')))));
  }

  /** One incoming frame through this rank's stage, by the demo's loop (docs/ranks.md). */
  private step(leaseId: string, payload: Buffer, end: boolean): void {
    const held = this.held.get(leaseId)!;
    const last = this.opts.index === this.opts.count - 1;
    if (end) {
      if (this.opts.index !== 0) this.frame(leaseId, new Uint8Array(0), true);
      return this.finish(leaseId, last);
    }
    if (this.opts.index === 0) {
      const { step, token } = readTokenFrame(payload);
      const max = Number(held.lease.input.max_tokens ?? 16);
      if (token === END_TOKEN || step + 1 >= max) {
        this.frame(leaseId, new Uint8Array(0), true);
        return this.finish(leaseId, false);
      }
    }
    this.frame(leaseId, this.stage.forward(payload));
  }

  private finish(leaseId: string, last: boolean): void {
    const held = this.held.get(leaseId)!;
    if (held.over) return;
    held.over = true;
    if (!last) {
      void this.report(leaseId, { type: 'complete', output: { urls: [] } });
      return;
    }
    // The last rank saw every token it sampled: the text is theirs, stop or length by the last.
    const sampled = this.sampled(held);
    const output = { urls: [], text: detokenize(sampled), finish_reason: sampled.at(-1) === END_TOKEN ? 'stop' : 'length', model: 'demo-ranked-llm' };
    if (!this.opts.receipt) return void this.report(leaseId, { type: 'complete', output });
    void this.opts.receipt(held.lease, this.workerId).then((receipt) => this.report(leaseId, { type: 'complete', output, receipt }));
  }

  /** The tokens the last rank sampled: its stage run again over what it received (cheap, and keeps no extra state). */
  private sampled(held: HeldRank): number[] {
    return held.received.filter((p) => p.length > 0).map((p) => readTokenFrame(this.stage.forward(p)).token);
  }
}
