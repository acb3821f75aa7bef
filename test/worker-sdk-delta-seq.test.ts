import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import WebSocket, { WebSocketServer } from 'ws';
import { MAX_OUTPUT_DELTA } from '../sdk/protocol/index.js';
import { SwitchyardWorker, silentLogger, type SwitchyardWorkerOptions } from '../sdk/worker/index.js';
import { until } from './helpers/harness.js';

const KIND = 'inference:image:generate';
type Frame = Record<string, any>;

/**
 * A gateway end scripted per socket: `protocol` is what `registered` agrees on, `answer` decides
 * each report's answer (an ack unless it returns false), every frame is recorded with its socket.
 */
class ScriptedGateway {
  wss!: WebSocketServer;
  url!: string;
  frames: Array<Frame & { socket: number }> = [];
  sockets: WebSocket[] = [];
  protocol = 4;
  answer: (frame: Frame, socket: number, ws: WebSocket) => boolean | void = () => {};

  async start(): Promise<this> {
    this.wss = new WebSocketServer({ host: '127.0.0.1', port: 0, path: '/v1/workers/connect' });
    await new Promise<void>((r) => this.wss.once('listening', () => r()));
    this.url = `http://127.0.0.1:${(this.wss.address() as AddressInfo).port}`;
    this.wss.on('connection', (ws) => {
      const socket = this.sockets.push(ws);
      ws.on('message', (data) => {
        const frame = JSON.parse(data.toString()) as Frame;
        this.frames.push({ ...frame, socket });
        if (frame.type === 'register') {
          const resumed = (frame.resume ?? []).map((c: Frame) => c.lease_id);
          ws.send(JSON.stringify({ type: 'registered', worker_id: 'wkr_fake', protocol: this.protocol, heartbeat_ms: 1000, lease_ttl_ms: 10_000, resumed, lost: [] }));
        } else if (frame.type !== 'heartbeat' && this.answer(frame, socket, ws) !== false) {
          ws.send(JSON.stringify({ type: 'ack', lease_id: frame.lease_id, of: frame.type }));
        }
      });
    });
    return this;
  }

  lease(): Frame {
    return { type: 'lease', lease_id: 'lse_1', fence: 1, run_id: 'run_1', kind: KIND, tier: 'open', attempt: 1, input: {}, upload_token: 'tok', upload_url: 'http://127.0.0.1:1/v1/leases/x/artifacts' };
  }

  outputs(socket?: number): Frame[] {
    return this.frames.filter((f) => f.type === 'output' && (socket === undefined || f.socket === socket));
  }

  async stop(): Promise<void> {
    for (const ws of this.wss.clients) ws.terminate();
    await new Promise<void>((r) => this.wss.close(() => r()));
  }
}

describe('worker SDK: numbered output deltas', () => {
  let gw: ScriptedGateway;
  let w: SwitchyardWorker | undefined;
  const start = async (o: Pick<SwitchyardWorkerOptions, 'handler'>) => {
    w = new SwitchyardWorker({ gateway: gw.url, token: 'swt_test', kinds: [KIND], logger: silentLogger, ...o });
    await w.start();
    return w;
  };
  beforeEach(async () => {
    gw = await new ScriptedGateway().start();
  });
  afterEach(async () => {
    await w?.stop({ timeoutMs: 0 });
    w = undefined;
    await gw.stop();
  });

  /**
   * The handler streams a, b, c, d, each a full frame (so none coalesce); the first instance acks
   * a and b only, asks the worker to move and drops the socket once c is in; on the second the
   * handler streams e and completes.
   */
  async function moveMidStream(protocol: number) {
    gw.protocol = protocol;
    let release!: () => void;
    const released = new Promise<void>((r) => (release = r));
    gw.answer = (frame, socket, ws) => {
      if (socket !== 1 || frame.type !== 'output') return;
      const n = gw.outputs(1).length;
      if (n > 2) return false;
      if (n === 2) {
        // Both acks are on their way before the socket goes: only c (and d, not sent yet) stay un-acked.
        ws.send(JSON.stringify({ type: 'ack', lease_id: frame.lease_id, of: 'output' }));
        ws.send(JSON.stringify({ type: 'reconnect' }));
        return false;
      }
    };
    const done = new Promise<void>((resolve) => {
      void start({
        handler: async (_kind, _input, ctx) => {
          for (const d of ['a', 'b', 'c', 'd']) ctx.output(d.repeat(MAX_OUTPUT_DELTA));
          await released;
          ctx.output('e');
          resolve();
          return { artifacts: [] };
        },
      });
    });
    await until('a worker', async () => gw.sockets.length === 1 && gw.frames.some((f) => f.type === 'register'));
    gw.sockets[0].send(JSON.stringify(gw.lease()));
    await until('three outputs', async () => gw.outputs(1).length === 3);
    gw.sockets[0].terminate();
    await until('the lease claimed on a second socket', async () => gw.frames.some((f) => f.type === 'register' && f.socket === 2 && f.resume?.length === 1));
    release();
    await done;
    await until('complete', async () => gw.frames.some((f) => f.type === 'complete' && f.socket === 2));
  }
  const shape = (f: Frame) => [f.seq, f.delta[0], f.delta.length];

  it('protocol 4: outputs are numbered; after a move only the un-acked ones go again, with their numbers, before the new ones', async () => {
    await moveMidStream(4);
    const D = MAX_OUTPUT_DELTA;
    assert.deepEqual(gw.outputs(1).map(shape), [[1, 'a', D], [2, 'b', D], [3, 'c', D]]);
    assert.deepEqual(gw.outputs(2).map(shape), [[3, 'c', D], [4, 'd', D], [5, 'e', 1]]);
    // Deduped by number, as the gateway logs them: the handler's text, once.
    const logged = new Map<number, string>();
    for (const f of gw.outputs()) if (!logged.has(f.seq)) logged.set(f.seq, f.delta);
    assert.equal([...logged.values()].join(''), ['a', 'b', 'c', 'd'].map((c) => c.repeat(D)).join('') + 'e');
  });

  it('protocol 3: outputs carry no number and nothing is sent again (it could be logged twice)', async () => {
    await moveMidStream(3);
    assert.ok(gw.outputs().every((f) => !('seq' in f)));
    assert.deepEqual(gw.outputs(2).map((f) => [f.delta[0], f.delta.length]), [['d', MAX_OUTPUT_DELTA], ['e', 1]]);
  });

  /** Runs one lease whose handler is `body`; resolves once its final report is answered. */
  async function runLease(body: (ctx: { output(d: string): void; log(l: string): void }) => void) {
    await start({
      handler: async (_kind, _input, ctx) => {
        body(ctx);
        return { artifacts: [] };
      },
    });
    gw.sockets[0].send(JSON.stringify(gw.lease()));
    await until('complete', async () => gw.frames.some((f) => f.type === 'complete'));
  }

  it('coalesces the deltas written while an output frame is in flight: fewer frames, numbered in order, the exact text; a log line stays between the texts around it', async () => {
    const sent = Array.from({ length: 3000 }, (_, i) => `<${i}>`);
    await runLease((ctx) => {
      for (const d of sent.slice(0, 2990)) ctx.output(d);
      ctx.log('between');
      for (const d of sent.slice(2990)) ctx.output(d);
    });
    const frames = gw.frames.filter((f) => f.type === 'output' || f.type === 'log');
    const outs = frames.filter((f) => f.type === 'output');
    assert.ok(outs.length < sent.length / 100, `${outs.length} output frames for ${sent.length} deltas`);
    assert.equal(outs.map((f) => f.delta).join(''), sent.join(''));
    assert.deepEqual(outs.map((f) => f.seq), outs.map((_, i) => i + 1));
    for (const f of outs) assert.match(f.delta, /^(<\d+>)+$/, 'whole deltas only');
    const before = frames.slice(0, frames.findIndex((f) => f.type === 'log'));
    assert.equal(before.map((f) => f.delta).join(''), sent.slice(0, 2990).join(''));
    // The first delta does not wait: nothing was in flight.
    assert.equal(outs[0].delta, sent[0]);
  });

  it('a coalesced frame stays within the protocol limit and never splits a delta', async () => {
    const part = 30_000;
    const sent = Array.from({ length: 20 }, (_, i) => String.fromCharCode(97 + i).repeat(part));
    await runLease((ctx) => sent.forEach((d) => ctx.output(d)));
    const outs = gw.outputs();
    assert.equal(outs.map((f) => f.delta).join(''), sent.join(''));
    for (const f of outs) {
      assert.ok(f.delta.length <= MAX_OUTPUT_DELTA);
      assert.equal(f.delta.length % part, 0, 'whole deltas only');
    }
    assert.ok(outs.length < sent.length, `${outs.length} frames for ${sent.length} deltas`);
    assert.ok(outs.some((f) => f.delta.length === 3 * part), 'frames fill up to the limit');
  });
});
