import assert from 'node:assert/strict';
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import WebSocket, { WebSocketServer } from 'ws';
import {
  SwitchyardWorker,
  UploadError,
  WorkerRefusedError,
  silentLogger,
  uploadArtifact,
  workerSocketUrl,
  type Engine,
  type EngineResult,
  type SwitchyardWorkerOptions,
} from '../sdk/worker/index.js';
import { devVerifier } from '../api/main/dev/dev-attestation.js';
import { createDemoEngine } from '../sdk/engines/demo/index.js';
import { encodePng } from '../sdk/engines/demo/png.js';
import { REDIS_URL, TestGateway, cleanupPrefix, uniquePrefix } from './helpers/harness.js';
import { freePort } from './helpers/ports.js';

const KIND = 'inference:image:generate';
const DEADLINE_MS = 10_000;

// ---- helpers ----------------------------------------------------------------------------------

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Polls `check` until it returns something other than undefined/false; fails after the deadline. */
async function waitFor<T>(what: string, check: () => Promise<T | undefined | false> | T | undefined | false, ms = DEADLINE_MS): Promise<T> {
  const until = Date.now() + ms;
  for (;;) {
    const value = await check();
    if (value !== undefined && value !== false) return value as T;
    if (Date.now() > until) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await sleep(25);
  }
}

/** A promise with its resolve, to hold a handler until the test lets it go. */
function latch<T = void>() {
  let resolve!: (v: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
}


/** The job once `pred` holds (default: terminal), polled over HTTP with a deadline. */
async function waitJob(gw: TestGateway, key: string, runId: string, pred: (job: any) => boolean = (j) => j.terminal): Promise<any> {
  let last: any;
  return waitFor(`job ${runId}`, async () => {
    const res = await gw.request('GET', `/v1/jobs/${runId}`, { key });
    assert.equal(res.status, 200, res.text);
    last = res.body;
    return pred(res.body) ? res.body : undefined;
  }).catch((err: Error) => {
    throw new Error(`${err.message}; job was ${JSON.stringify(last)}`);
  });
}

async function credits(gw: TestGateway, key: string): Promise<number> {
  const res = await gw.request('GET', '/v1/account', { key });
  assert.equal(res.status, 200, res.text);
  return res.body.credits;
}

function artifact(name: string, data: Buffer, contentType = 'image/png'): EngineResult {
  return { artifacts: [{ name, contentType, data }] };
}

function rejectOnAbort(signal: AbortSignal): Promise<never> {
  return new Promise((_, reject) => {
    if (signal.aborted) return reject(signal.reason);
    signal.addEventListener('abort', () => reject(signal.reason), { once: true });
  });
}

// ---- the upload helper, against a local HTTP server ---------------------------------------

describe('worker SDK: uploadArtifact', () => {
  let server: http.Server;
  let url: string;
  let answers: Array<(req: http.IncomingMessage, res: http.ServerResponse, body: Buffer) => void>;
  let seen: Array<{ method: string; url: string; headers: http.IncomingHttpHeaders; body: Buffer }>;

  beforeEach(async () => {
    answers = [];
    seen = [];
    server = http.createServer((req, res) => {
      const parts: Buffer[] = [];
      req.on('data', (c: Buffer) => parts.push(c));
      req.on('end', () => {
        const body = Buffer.concat(parts);
        seen.push({ method: req.method!, url: req.url!, headers: req.headers, body });
        const answer = answers.shift() ?? ((_q, s) => s.writeHead(500).end());
        answer(req, res, body);
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1/leases/lse_abc/artifacts`;
  });
  afterEach(async () => {
    server.closeAllConnections();
    await new Promise<void>((r) => server.close(() => r()));
  });

  const stored = (body: Buffer, contentType: string) => (_req: http.IncomingMessage, res: http.ServerResponse) => {
    res.writeHead(201, { 'content-type': 'application/json' }).end(
      JSON.stringify({ url: 'http://127.0.0.1/v1/artifacts/x/my%20file.png', sha256: createHash('sha256').update(body).digest('hex'), size: body.length, content_type: contentType }),
    );
  };

  it('posts the bytes with the upload token, content type and name, retrying a transient 503', async () => {
    const data = randomBytes(70_000);
    answers.push((_q, s) => s.writeHead(503, { 'content-type': 'application/json' }).end('{"error":{"code":"unavailable","message":"busy"}}'));
    answers.push(stored(data, 'image/png'));
    const out = await uploadArtifact(url, 'tok123', { name: 'my file.png', contentType: 'image/png', data }, { retryDelayMs: 10 });
    assert.equal(out.size, data.length);
    assert.equal(seen.length, 2);
    for (const req of seen) {
      assert.equal(req.method, 'POST');
      assert.equal(new URL(req.url, 'http://x').searchParams.get('name'), 'my file.png');
      assert.equal(new URL(req.url, 'http://x').pathname, '/v1/leases/lse_abc/artifacts');
      assert.equal(req.headers.authorization, 'Bearer tok123');
      assert.equal(req.headers['content-type'], 'image/png');
      assert.equal(req.headers['content-length'], String(data.length));
      assert.ok(req.body.equals(data));
    }
  });

  it('throws a typed, non-retryable UploadError on a refusal, without retrying', async () => {
    answers.push((_q, s) => s.writeHead(401, { 'content-type': 'application/json' }).end('{"error":{"code":"unauthorized","message":"a live lease\'s upload_token is required"}}'));
    await assert.rejects(
      uploadArtifact(url, 'expired', { name: 'a.png', contentType: 'image/png', data: Buffer.from('x') }, { retryDelayMs: 10 }),
      (err: unknown) => {
        assert.ok(err instanceof UploadError);
        assert.equal(err.status, 401);
        assert.equal(err.code, 'unauthorized');
        assert.equal(err.retryable, false);
        assert.match(err.message, /upload_token/);
        return true;
      },
    );
    assert.equal(seen.length, 1);
  });

  it('retries network errors a few times, then gives up with a retryable UploadError', async () => {
    for (let i = 0; i < 3; i++) answers.push((req) => req.socket.destroy());
    await assert.rejects(uploadArtifact(url, 't', { name: 'a.png', contentType: 'image/png', data: Buffer.from('x') }, { retries: 2, retryDelayMs: 10 }), (err: unknown) => {
      assert.ok(err instanceof UploadError);
      assert.equal(err.code, 'network_error');
      assert.equal(err.retryable, true);
      return true;
    });
    assert.equal(seen.length, 3);
  });

  it('refuses an answer that does not match the bytes sent', async () => {
    answers.push(stored(Buffer.from('something else'), 'image/png'));
    await assert.rejects(uploadArtifact(url, 't', { name: 'a.png', contentType: 'image/png', data: Buffer.from('x') }, { retries: 0 }), (err: unknown) => {
      assert.ok(err instanceof UploadError);
      assert.equal(err.code, 'corrupted');
      return true;
    });
  });

  it('stops at once when its signal aborts', async () => {
    answers.push((_q, s) => setTimeout(() => s.writeHead(503).end(), 50));
    const ac = new AbortController();
    const p = uploadArtifact(url, 't', { name: 'a.png', contentType: 'image/png', data: Buffer.from('x') }, { retryDelayMs: 5_000, signal: ac.signal });
    setTimeout(() => ac.abort(new DOMException('stop', 'AbortError')), 100);
    await assert.rejects(p, { name: 'AbortError' });
  });
});

describe('worker SDK: options', () => {
  it('derives the WebSocket URL from the gateway URL', () => {
    assert.equal(workerSocketUrl('http://gw.example:8080'), 'ws://gw.example:8080/v1/workers/connect');
    assert.equal(workerSocketUrl('https://gw.example/base/'), 'wss://gw.example/base/v1/workers/connect');
    assert.equal(workerSocketUrl('wss://gw.example/v1/workers/connect'), 'wss://gw.example/v1/workers/connect');
    assert.throws(() => workerSocketUrl('ftp://gw.example'), TypeError);
  });

  it('checks its options up front', () => {
    const base = { gateway: 'http://127.0.0.1:1', token: 'swt_x', handler: (async () => ({ artifacts: [] })) as Engine };
    assert.throws(() => new SwitchyardWorker({ ...base }), /kinds is required/);
    assert.throws(() => new SwitchyardWorker({ ...base, kinds: [KIND], slots: 0 }), RangeError);
    assert.throws(() => new SwitchyardWorker({ ...base, kinds: [KIND], slots: 65 }), RangeError);
    assert.throws(() => new SwitchyardWorker({ ...base, kinds: ['inference:rig'], handler: { [KIND]: base.handler } }), /no handler for inference:rig/);
    const w = new SwitchyardWorker({ gateway: 'http://127.0.0.1:1', token: 'swt_x', handler: { [KIND]: base.handler, 'inference:rig': base.handler } });
    assert.deepEqual(w.kinds, [KIND, 'inference:rig']);
  });
});

// ---- protocol details, against a scripted gateway -----------------------------------------

/** A fake gateway socket end: records frames, answers register and acks reports. */
class ScriptedGateway {
  wss!: WebSocketServer;
  url!: string;
  frames: Array<Record<string, any>> = [];
  sockets: WebSocket[] = [];
  /** Overrides the default answer to a report frame (ack); return false to send nothing. */
  onReport?: (frame: Record<string, any>, ws: WebSocket) => boolean | void;
  /** Overrides the default answer to a register (`registered`); return false to send nothing. */
  onRegister?: (frame: Record<string, any>, ws: WebSocket) => boolean | void;
  /** The protocol version `registered` says was agreed. */
  protocol = 1;

  async start(): Promise<this> {
    this.wss = new WebSocketServer({ host: '127.0.0.1', port: 0, path: '/v1/workers/connect' });
    await new Promise<void>((r) => this.wss.once('listening', () => r()));
    this.url = `http://127.0.0.1:${(this.wss.address() as AddressInfo).port}`;
    this.wss.on('connection', (ws, req) => {
      this.sockets.push(ws);
      ws.on('message', (data) => {
        const frame = JSON.parse(data.toString()) as Record<string, any>;
        frame.authorization = req.headers.authorization;
        this.frames.push(frame);
        if (frame.type === 'register') {
          if (this.onRegister?.(frame, ws) !== false) ws.send(JSON.stringify({ type: 'registered', worker_id: 'wkr_fake', protocol: this.protocol, heartbeat_ms: 100, lease_ttl_ms: 2000 }));
        } else if (frame.type === 'backend') return;
        else if (frame.type !== 'heartbeat' && this.onReport?.(frame, ws) !== false) ws.send(JSON.stringify({ type: 'ack', lease_id: frame.lease_id, of: frame.type }));
      });
    });
    return this;
  }

  lease(n: number, over: Record<string, unknown> = {}): Record<string, unknown> {
    return {
      type: 'lease',
      lease_id: `lse_${n}`,
      fence: 1,
      run_id: `run_${n}`,
      kind: KIND,
      tier: 'open',
      attempt: 1,
      input: { prompt: `p${n}` },
      upload_token: 'tok',
      upload_url: 'http://127.0.0.1:1/v1/leases/x/artifacts',
      ...over,
    };
  }

  send(frame: Record<string, unknown>): void {
    for (const ws of this.sockets) if (ws.readyState === ws.OPEN) ws.send(JSON.stringify(frame));
  }

  of(type: string): Array<Record<string, any>> {
    return this.frames.filter((f) => f.type === type);
  }

  async stop(): Promise<void> {
    for (const ws of this.wss.clients) ws.terminate();
    await new Promise<void>((r) => this.wss.close(() => r()));
  }
}

describe('worker SDK: frames (scripted gateway)', () => {
  let gw: ScriptedGateway;
  const workers: SwitchyardWorker[] = [];
  const worker = (o: Partial<SwitchyardWorkerOptions> & Pick<SwitchyardWorkerOptions, 'handler'>) => {
    const w = new SwitchyardWorker({ gateway: gw.url, token: 'swt_test', kinds: [KIND], logger: silentLogger, ...o });
    workers.push(w);
    return w;
  };
  beforeEach(async () => {
    gw = await new ScriptedGateway().start();
  });
  afterEach(async () => {
    await Promise.all(workers.splice(0).map((w) => w.stop({ timeoutMs: 0 })));
    await gw.stop();
  });

  it('registers with its token, kinds, tier, slots and info; heartbeats name its leases', async () => {
    const hold = latch();
    const w = worker({ slots: 3, tier: 'open', hardware: { gpu: 'none' }, software: { name: 'test-engine' }, handler: async () => (await hold.promise, { artifacts: [] }) });
    await w.start();
    const [reg] = gw.of('register');
    assert.equal(reg.authorization, 'Bearer swt_test');
    assert.deepEqual(reg.protocol, [1, 2, 3, 4, 5, 6, 7]);
    assert.match(reg.identity, /^sdk-[0-9a-f]{24}$/, 'a random identity of its own, sent on every connection');
    assert.deepEqual(reg.kinds, [KIND]);
    assert.equal(reg.tier, 'open');
    assert.equal(reg.slots, 3);
    assert.equal(reg.hardware.gpu, 'none');
    assert.equal(reg.software.name, 'test-engine');
    assert.equal(reg.worker_id, undefined, 'worker_id is refused by the gateway schema (see report)');
    gw.send(gw.lease(1));
    await waitFor('a heartbeat naming the lease', () => gw.of('heartbeat').some((f) => f.leases.includes('lse_1')));
    hold.resolve();
    await waitFor('complete', () => gw.of('complete').length === 1);
    const mark = gw.frames.length;
    await waitFor('a heartbeat without the lease', () => gw.frames.slice(mark).some((f) => f.type === 'heartbeat' && f.leases.length === 0));
  });

  it('keeps its identity across reconnections, and registers without it when an older gateway refuses the field', async () => {
    gw.onRegister = (frame, ws) => {
      if (frame.identity === undefined) return;
      // A gateway of protocol 4: its register schema has no identity.
      ws.send(JSON.stringify({ type: 'error', code: 'bad_frame', message: 'invalid register frame: /identity must NOT have additional properties' }));
      ws.close(4400, 'bad register frame');
      return false;
    };
    const w = worker({ identity: 'render-box-7', handler: async () => ({ artifacts: [] }) });
    await w.start();
    const registers = gw.of('register');
    assert.deepEqual(registers.map((r) => r.identity), ['render-box-7', undefined]);
    gw.onRegister = undefined;
    const w2 = worker({ handler: async () => ({ artifacts: [] }) });
    await w2.start();
    const first = gw.of('register').at(-1)!.identity;
    gw.sockets.at(-1)!.terminate();
    await waitFor('the worker back', () => gw.of('register').length === registers.length + 2);
    assert.equal(gw.of('register').at(-1)!.identity, first, 'the same identity on the new connection');
  });

  it('a 4409 close (its identity registered by another live process) stops the worker as superseded, without reconnecting', async () => {
    const w = worker({ handler: async () => ({ artifacts: [] }) });
    await w.start();
    const refused = new Promise<{ code: string; status: number }>((resolve) => w.once('refused', resolve));
    gw.sockets[0].close(4409, 'superseded');
    const err = await refused;
    assert.equal(err.code, 'superseded');
    assert.equal(err.status, 4409);
    await w.wait().catch(() => {});
    assert.equal(gw.of('register').length, 1);
  });

  it('a lease failing upstream_unavailable tells a protocol 5 gateway the backend is down before its fail, and up again once the probe answers', async () => {
    gw.protocol = 5;
    let probes = 0;
    const states: boolean[] = [];
    const w = worker({
      handler: async () => {
        throw Object.assign(new Error('ComfyUI refused the connection'), { code: 'upstream_unavailable', retryable: true });
      },
      backend: {
        probe: async () => {
          if (++probes < 3) throw new Error('still down');
        },
        firstDelayMs: 10,
        maxDelayMs: 20,
      },
    });
    w.on('backend', (s) => states.push(s.available));
    await w.start();
    gw.send(gw.lease(1));
    await waitFor('the backend up again', () => gw.of('backend').length === 2);
    const types = gw.frames.filter((f) => f.type === 'backend' || f.type === 'fail').map((f) => (f.type === 'backend' ? `backend:${f.available}` : f.type));
    assert.deepEqual(types, ['backend:false', 'fail', 'backend:true']);
    assert.equal(gw.of('backend')[0].message, 'ComfyUI refused the connection');
    assert.equal(probes, 3);
    assert.deepEqual(states, [false, true]);
  });

  it('a gateway older than protocol 5 is not sent backend frames', async () => {
    gw.protocol = 4;
    const w = worker({ handler: async () => Promise.reject(Object.assign(new Error('gone'), { code: 'upstream_unavailable', retryable: true })), backend: { firstDelayMs: 10 } });
    const states: boolean[] = [];
    w.on('backend', (s) => states.push(s.available));
    await w.start();
    gw.send(gw.lease(1));
    await waitFor('the worker available again after its wait', () => states.length === 2);
    assert.deepEqual(gw.of('backend'), []);
  });

  it("sends a handler's usage in complete to a protocol 7 gateway, checked, and leaves it out for an older one", async () => {
    for (const protocol of [7, 6]) {
      gw.protocol = protocol;
      const seen = gw.of('complete').length;
      const w = worker({ handler: async () => ({ artifacts: [], usage: { input_tokens: 12.4, output_tokens: 3, seconds: 1.5, images: -1, bogus: 4 } as never }) });
      await w.start();
      gw.send(gw.lease(1));
      await waitFor('complete', () => gw.of('complete').length === seen + 1);
      const frame = gw.of('complete')[seen];
      if (protocol === 7) assert.deepEqual(frame.usage, { input_tokens: 12, output_tokens: 3, seconds: 1.5 });
      else assert.equal('usage' in frame, false, 'a protocol 6 gateway refuses a field it does not know');
      await w.stop({ timeoutMs: 0 });
    }
  });

  it('throttles progress frames and sends log and output frames; complete carries urls and extra', async () => {
    const w = worker({
      progressIntervalMs: 250,
      handler: async (_kind, _input, ctx) => {
        for (let i = 1; i <= 100; i++) ctx.progress(i / 100, `step ${i}`);
        ctx.log('a log line');
        ctx.output('x'.repeat(150_000));
        await sleep(600);
        return { artifacts: [], extra: { text: 'hi', urls: ['http://wrong'] } };
      },
    });
    await w.start();
    gw.send(gw.lease(1));
    await waitFor('complete', () => gw.of('complete').length === 1);
    const progress = gw.of('progress');
    assert.deepEqual(
      progress.map((f) => [f.progress, f.message]),
      [
        [0.01, 'step 1'],
        [1, 'step 100'],
      ],
    );
    assert.deepEqual(gw.of('log').map((f) => f.line), ['a log line']);
    assert.deepEqual(gw.of('output').map((f) => f.delta.length), [100_000, 50_000]);
    for (const f of gw.frames.filter((f) => f.lease_id)) assert.equal(f.fence, 1);
    assert.deepEqual(gw.of('complete')[0].output, { text: 'hi', urls: [] });
  });

  it('maps handler errors to fail frames', async () => {
    const errors: Record<string, unknown> = {
      'p1': Object.assign(new Error('out of memory'), { code: 'GPU-OOM', retryable: true }),
      'p2': Object.assign(new Error('nsfw prompt'), { code: 'bad_prompt', retryable: false }),
      'p3': new Error('boom'),
      'p4': 'a string',
    };
    const w = worker({ slots: 4, handler: async (_k, input) => Promise.reject(errors[input.prompt as string]) });
    await w.start();
    for (let i = 1; i <= 4; i++) gw.send(gw.lease(i));
    await waitFor('4 fails', () => gw.of('fail').length === 4);
    const byLease = Object.fromEntries(gw.of('fail').map((f) => [f.lease_id, f.error]));
    assert.deepEqual(byLease.lse_1, { code: 'gpu_oom', message: 'out of memory', retryable: true });
    assert.deepEqual(byLease.lse_2, { code: 'bad_prompt', message: 'nsfw prompt', retryable: false });
    assert.deepEqual(byLease.lse_3, { code: 'engine_error', message: 'boom', retryable: true });
    assert.deepEqual(byLease.lse_4, { code: 'engine_error', message: 'a string', retryable: true });
  });

  it('holds the final report until the earlier frames are answered: a log line sent again still precedes the complete', async () => {
    // The gateway takes reports in order but may refuse one (`unavailable`, its datastore blipped)
    // and take the next: a complete taken before the log line is sent again would end the lease
    // and leave the log line refused as stale.
    let refused = false;
    gw.onReport = (frame, ws) => {
      if (frame.type !== 'log' || refused) return;
      refused = true;
      setTimeout(() => ws.send(JSON.stringify({ type: 'error', code: 'unavailable', lease_id: frame.lease_id, of: 'log', retryable: true, message: 'datastore down' })), 100);
      return false;
    };
    const w = worker({
      handler: async (_kind, _input, ctx) => {
        ctx.log('the line');
        return { artifacts: [] };
      },
    });
    await w.start();
    gw.send(gw.lease(1));
    await waitFor('complete', () => gw.of('complete').length === 1);
    const types = gw.frames.filter((f) => f.lease_id === 'lse_1').map((f) => f.type);
    assert.deepEqual(types, ['log', 'log', 'complete']);
  });

  it('a stale_lease answer aborts the handler and nothing more is reported for that lease', async () => {
    let aborted = false;
    gw.onReport = (frame, ws) => {
      if (frame.type !== 'progress') return;
      ws.send(JSON.stringify({ type: 'error', code: 'stale_lease', message: 'this lease is no longer yours: drop its work', lease_id: frame.lease_id }));
      return false;
    };
    const dropped = latch<string>();
    const w = worker({
      handler: async (_k, _i, ctx) => {
        ctx.progress(0.1);
        await rejectOnAbort(ctx.signal).catch((e) => {
          aborted = true;
          throw e;
        });
        return { artifacts: [] };
      },
    });
    w.on('dropped', (lease) => dropped.resolve(lease.lease_id));
    await w.start();
    gw.send(gw.lease(1));
    assert.equal(await dropped.promise, 'lse_1');
    assert.ok(aborted);
    await sleep(100);
    assert.deepEqual(gw.frames.filter((f) => f.lease_id === 'lse_1').map((f) => f.type), ['progress']);
    assert.equal(w.activeLeases, 0);
  });

  it('stop() is graceful: running work finishes and reports, a lease arriving meanwhile is not started, then the socket closes', async () => {
    const hold = latch();
    const started: string[] = [];
    const w = worker({
      slots: 2,
      handler: async (_k, input) => {
        started.push(input.prompt as string);
        await hold.promise;
        return { artifacts: [] };
      },
    });
    await w.start();
    gw.send(gw.lease(1));
    await waitFor('the first handler', () => started.length === 1);
    const stopped = w.stop();
    gw.send(gw.lease(2));
    await sleep(100);
    assert.deepEqual(started, ['p1']);
    assert.equal(gw.sockets[0].readyState, WebSocket.OPEN);
    hold.resolve();
    await stopped;
    assert.deepEqual(gw.of('complete').map((f) => f.lease_id), ['lse_1']);
    assert.equal(gw.frames.filter((f) => f.lease_id === 'lse_2').length, 0);
    await waitFor('the socket to close', () => gw.sockets[0].readyState === WebSocket.CLOSED);
  });

  it('on drain, finishes its leases, then reconnects and registers again', async () => {
    const hold = latch();
    const w = worker({ handler: async () => (await hold.promise, { artifacts: [] }) });
    let registered = 0;
    w.on('registered', () => registered++);
    await w.start();
    gw.send(gw.lease(1));
    await waitFor('the lease', () => w.running === 1);
    gw.send({ type: 'drain' });
    await sleep(50);
    assert.equal(gw.sockets[0].readyState, WebSocket.OPEN, 'the running lease keeps the socket open');
    hold.resolve();
    await waitFor('a second registration', () => registered === 2);
    assert.equal(gw.of('complete').length, 1);
    assert.equal(gw.of('register').length, 2);
    assert.equal(gw.sockets[0].readyState, WebSocket.CLOSED);
  });

  it('a cancel of a lease still waiting for a slot answers fail canceled without running it', async () => {
    const hold = latch();
    const ran: string[] = [];
    const w = worker({ slots: 1, handler: async (_k, input) => (ran.push(input.prompt as string), await hold.promise, { artifacts: [] }) });
    await w.start();
    gw.send(gw.lease(1));
    gw.send(gw.lease(2));
    gw.send({ type: 'cancel', lease_id: 'lse_2', run_id: 'run_2' });
    await waitFor('the fail of lse_2', () => gw.of('fail').length === 1);
    assert.deepEqual(gw.of('fail')[0], { type: 'fail', lease_id: 'lse_2', fence: 1, error: { code: 'canceled', message: 'canceled by the caller', retryable: false }, authorization: 'Bearer swt_test' });
    hold.resolve();
    await waitFor('the complete of lse_1', () => gw.of('complete').length === 1);
    assert.deepEqual(ran, ['p1']);
  });

  it('holds a lease beyond its slots until a slot frees', async () => {
    const holds = [latch(), latch()];
    let running = 0;
    let max = 0;
    const w = worker({
      slots: 1,
      handler: async (_k, input) => {
        running++;
        max = Math.max(max, running);
        await holds[Number(String(input.prompt).slice(1)) - 1].promise;
        running--;
        return { artifacts: [] };
      },
    });
    await w.start();
    gw.send(gw.lease(1));
    gw.send(gw.lease(2)); // a gateway must not do this; the worker copes
    await sleep(100);
    assert.equal(w.running, 1);
    holds[0].resolve();
    holds[1].resolve();
    await waitFor('both completes', () => gw.of('complete').length === 2);
    assert.equal(max, 1);
  });
});

// ---- input files: a scripted gateway's lease names files a local HTTP server serves --------

/** Serves input files the way the gateway does: only with the lease's upload token as a bearer. */
class FileServer {
  server!: http.Server;
  url!: string;
  files = new Map<string, Buffer>();
  /** Statuses to answer for a path before serving it, first to last. */
  failures = new Map<string, number[]>();
  requests: Array<{ path: string; authorization?: string }> = [];

  constructor(private readonly token: string) {}

  async start(): Promise<this> {
    this.server = http.createServer((req, res) => {
      const p = req.url!;
      if (req.method === 'POST') return this.upload(req, res);
      this.requests.push({ path: p, authorization: req.headers.authorization });
      if (req.headers.authorization !== `Bearer ${this.token}`) return void res.writeHead(401, { 'content-type': 'application/json' }).end('{"error":{"code":"unauthorized","message":"a live lease\'s upload_token is required"}}');
      const status = this.failures.get(p)?.shift();
      if (status) return void res.writeHead(status, { 'content-type': 'application/json' }).end(`{"error":{"code":"http_${status}","message":"scripted"}}`);
      const data = this.files.get(p);
      if (data && this.stalled.has(p)) return void res.writeHead(200, { 'content-length': data.length }).write(data.subarray(0, data.length >> 1));
      if (!data) return void res.writeHead(404, { 'content-type': 'application/json' }).end('{"error":{"code":"not_found","message":"no such file"}}');
      res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': data.length }).end(data);
    });
    await new Promise<void>((r) => this.server.listen(0, '127.0.0.1', () => r()));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    return this;
  }

  /** Paths whose answer stops halfway through the body and never ends. */
  stalled = new Set<string>();
  /** Artifacts uploaded to /upload?name=..., by name. */
  uploads = new Map<string, Buffer>();

  private upload(req: http.IncomingMessage, res: http.ServerResponse): void {
    const parts: Buffer[] = [];
    req.on('data', (c: Buffer) => parts.push(c));
    req.on('end', () => {
      const body = Buffer.concat(parts);
      const name = new URL(req.url!, this.url).searchParams.get('name')!;
      this.uploads.set(name, body);
      res.writeHead(201, { 'content-type': 'application/json' }).end(JSON.stringify({ url: `${this.url}/artifacts/${name}`, sha256: createHash('sha256').update(body).digest('hex'), size: body.length, content_type: String(req.headers['content-type']) }));
    });
  }

  /** Serves `data` at /files/<name>; the lease's entry for it, with `over` applied. */
  add(name: string, data: Buffer, contentType: string, over: Record<string, unknown> = {}): Record<string, unknown> {
    this.files.set(`/files/${name}`, data);
    return { url: `${this.url}/files/${name}`, size: data.length, content_type: contentType, sha256: createHash('sha256').update(data).digest('hex'), ...over };
  }

  async stop(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((r) => this.server.close(() => r()));
  }
}

describe('worker SDK: input files (scripted gateway)', () => {
  let gw: ScriptedGateway;
  let files: FileServer;
  let tmpDir: string;
  const workers: SwitchyardWorker[] = [];
  const worker = (o: Partial<SwitchyardWorkerOptions> & Pick<SwitchyardWorkerOptions, 'handler'>) => {
    const w = new SwitchyardWorker({ gateway: gw.url, token: 'swt_test', kinds: [KIND], logger: silentLogger, inputFiles: { tmpDir, retryDelayMs: 10 }, ...o });
    workers.push(w);
    return w;
  };
  /** A handler that reads the file of `field` and reports its bytes' sha256 and where it was. */
  const readsInput = (field: string): Engine => async (_kind, _input, ctx) => {
    const file = await ctx.inputFile(field);
    return { artifacts: [], extra: { sha256: createHash('sha256').update(readFileSync(file.path)).digest('hex'), path: file.path } };
  };
  const failOf = (leaseId: string) => gw.of('fail').find((f) => f.lease_id === leaseId)?.error;

  beforeEach(async () => {
    gw = await new ScriptedGateway().start();
    files = await new FileServer('tok').start();
    tmpDir = mkdtempSync(path.join(os.tmpdir(), 'sy-input-files-'));
  });
  afterEach(async () => {
    await Promise.all(workers.splice(0).map((w) => w.stop({ timeoutMs: 0 })));
    await gw.stop();
    await files.stop();
    rmSync(tmpDir, { recursive: true, force: true });
  });

  it("fetches a file with the lease's upload token to a path under the temporary directory: the exact bytes, once per field, deleted when the lease ends", async () => {
    const data = randomBytes(300_000); // several chunks on the way
    const seen: Array<{ path: string; bytes: Buffer; same: boolean; size: number; contentType: string; sha256: string }> = [];
    const w = new SwitchyardWorker({
      gateway: gw.url,
      token: 'swt_test',
      kinds: [KIND],
      logger: silentLogger,
      handler: async (_kind, _input, ctx) => {
        const [a, b] = await Promise.all([ctx.inputFile('image'), ctx.inputFile('image')]);
        const again = await ctx.inputFile('image');
        seen.push({ path: a.path, bytes: readFileSync(a.path), same: a === b && b === again, size: a.size, contentType: a.contentType, sha256: a.sha256 });
        return { artifacts: [] };
      },
    });
    workers.push(w);
    await w.start();
    const entry = files.add('chair.png', data, 'image/png');
    gw.send(gw.lease(1, { input: { image: 'https://example.com/chair.png' }, files: { image: entry } }));
    await waitFor('complete', () => gw.of('complete').length === 1);
    const [got] = seen;
    assert.ok(got.bytes.equals(data), 'the handler read the exact bytes served');
    assert.ok(got.same, 'asking twice (at once, then again) gives the one fetch');
    assert.deepEqual([got.size, got.contentType, got.sha256], [data.length, 'image/png', entry.sha256]);
    assert.ok(got.path.startsWith(os.tmpdir() + path.sep), got.path);
    assert.match(got.path, /\.png$/);
    assert.deepEqual(files.requests, [{ path: '/files/chair.png', authorization: 'Bearer tok' }]);
    assert.equal(existsSync(got.path), false, 'the file is deleted');
    assert.equal(existsSync(path.dirname(got.path)), false, "and the lease's folder");
  });

  it('gives the demo engine its input: an image-to-mesh lease completes with a mesh made from the image it was sent', async () => {
    const MESH = 'inference:3d:image-to-mesh';
    const w = worker({ kinds: [MESH], handler: createDemoEngine({ delayMs: 0 }) });
    await w.start();
    const image = files.add('photo.png', encodePng(4, 2, 3, new Uint8Array(24).fill(200)), 'image/png');
    gw.send(gw.lease(1, { kind: MESH, input: { image: 'https://example.com/photo.png' }, files: { image }, upload_url: `${files.url}/upload` }));
    await waitFor('complete', () => gw.of('complete').length === 1);
    const { output } = gw.of('complete')[0];
    assert.deepEqual(output.urls, [`${files.url}/artifacts/mesh.glb`]);
    assert.equal(output.input.sha256, image.sha256);
    assert.deepEqual(output.input.mean_rgb, [200, 200, 200]);
    const glb = files.uploads.get('mesh.glb')!;
    assert.equal(JSON.parse(glb.toString('utf8', 20, 20 + glb.readUInt32LE(12))).asset.extras.input.sha256, image.sha256);
    assert.deepEqual(readdirSync(tmpDir), []);
  });

  it('fails the lease as bad_input, not retryable, when the bytes are not the size or sha256 of the lease, leaving no file behind', async () => {
    const data = randomBytes(20_000);
    const w = worker({ slots: 3, handler: readsInput('mesh') });
    await w.start();
    gw.send(gw.lease(1, { files: { mesh: files.add('a.glb', data, 'model/gltf-binary', { sha256: createHash('sha256').update('other bytes').digest('hex') }) } }));
    gw.send(gw.lease(2, { files: { mesh: files.add('b.glb', data, 'model/gltf-binary', { size: 1000 }) } }));
    gw.send(gw.lease(3, { files: { mesh: files.add('c.glb', data, 'model/gltf-binary', { size: data.length + 1 }) } }));
    await waitFor('3 fails', () => gw.of('fail').length === 3);
    for (const id of ['lse_1', 'lse_2', 'lse_3']) {
      assert.equal(failOf(id).code, 'bad_input', JSON.stringify(failOf(id)));
      assert.equal(failOf(id).retryable, false);
    }
    assert.match(failOf('lse_1').message, /sha256/);
    assert.match(failOf('lse_2').message, /larger than the 1000 bytes/);
    assert.match(failOf('lse_3').message, new RegExp(`has ${data.length} bytes, not the ${data.length + 1}`));
    assert.equal(files.requests.length, 3, 'a mismatch is not fetched again');
    assert.deepEqual(readdirSync(tmpDir), []);
  });

  it('fails the lease as bad_input when it has no file for the field, without sending the token to a URL that is not http(s)', async () => {
    const w = worker({ slots: 2, handler: readsInput('audio') });
    await w.start();
    gw.send(gw.lease(1, { input: { audio: 'https://example.com/a.wav' } }));
    gw.send(gw.lease(2, { files: { audio: { url: 'file:///etc/passwd', size: 10, content_type: 'audio/wav', sha256: 'a'.repeat(64) } } }));
    await waitFor('2 fails', () => gw.of('fail').length === 2);
    for (const id of ['lse_1', 'lse_2']) assert.deepEqual(failOf(id), { code: 'bad_input', message: 'the lease has no file for input field "audio"', retryable: false });
    assert.deepEqual(files.requests, []);
  });

  it('a refusal (404, 401) fails the lease as input_unavailable, not retryable, after one try', async () => {
    const w = worker({ slots: 2, handler: readsInput('image') });
    await w.start();
    const gone = files.add('gone.png', randomBytes(10), 'image/png');
    files.files.delete('/files/gone.png');
    gw.send(gw.lease(1, { files: { image: gone } }));
    gw.send(gw.lease(2, { upload_token: 'expired', files: { image: files.add('x.png', randomBytes(10), 'image/png') } }));
    await waitFor('2 fails', () => gw.of('fail').length === 2);
    assert.deepEqual([failOf('lse_1').code, failOf('lse_1').retryable], ['input_unavailable', false]);
    assert.match(failOf('lse_1').message, /404 not_found/);
    assert.deepEqual([failOf('lse_2').code, failOf('lse_2').retryable], ['input_unavailable', false]);
    assert.match(failOf('lse_2').message, /401 unauthorized/);
    assert.deepEqual(files.requests.map((r) => `${r.path} ${r.authorization}`).sort(), ['/files/gone.png Bearer tok', '/files/x.png Bearer expired']);
  });

  it('retries a transient answer (503, then 200) and a server that fails every try leaves the run retryable', async () => {
    const data = randomBytes(5_000);
    const w = worker({ slots: 2, handler: readsInput('image'), inputFiles: { tmpDir, retryDelayMs: 10, retries: 2 } });
    await w.start();
    files.failures.set('/files/flaky.png', [503]);
    files.failures.set('/files/down.png', [502, 502, 502, 502]);
    gw.send(gw.lease(1, { files: { image: files.add('flaky.png', data, 'image/png') } }));
    gw.send(gw.lease(2, { files: { image: files.add('down.png', data, 'image/png') } }));
    await waitFor('a complete and a fail', () => gw.of('complete').length === 1 && gw.of('fail').length === 1);
    assert.equal(gw.of('complete')[0].output.sha256, createHash('sha256').update(data).digest('hex'));
    assert.equal(files.requests.filter((r) => r.path === '/files/flaky.png').length, 2);
    assert.deepEqual([failOf('lse_2').code, failOf('lse_2').retryable], ['input_fetch_failed', true]);
    assert.equal(files.requests.filter((r) => r.path === '/files/down.png').length, 3, 'one try and two retries');
    assert.deepEqual(readdirSync(tmpDir), []);
  });

  it('a cancel stops a fetch halfway: the handler gets the abort, the lease fails canceled, the partial file is deleted', async () => {
    const rejected = latch<unknown>();
    const w = worker({
      handler: async (_kind, _input, ctx) => {
        await ctx.inputFile('audio').catch((err) => (rejected.resolve(err), Promise.reject(err)));
        return { artifacts: [] };
      },
    });
    await w.start();
    files.stalled.add('/files/long.wav');
    gw.send(gw.lease(1, { files: { audio: files.add('long.wav', randomBytes(1_000_000), 'audio/wav') } }));
    await waitFor('the file to be on its way to disk', () => readdirSync(tmpDir).flatMap((d) => readdirSync(path.join(tmpDir, d))).length === 1);
    gw.send({ type: 'cancel', lease_id: 'lse_1', run_id: 'run_1' });
    assert.equal(((await rejected.promise) as Error).name, 'AbortError');
    await waitFor('the fail', () => failOf('lse_1'));
    assert.equal(failOf('lse_1').code, 'canceled');
    assert.deepEqual(readdirSync(tmpDir), []);
  });

  it('deletes the files of a lease that is canceled or lost with its connection while its handler runs', async () => {
    const fetched = new Map<unknown, string>();
    const w = worker({
      slots: 2,
      handler: async (_kind, input, ctx) => {
        fetched.set(input.prompt, (await ctx.inputFile('image')).path);
        return rejectOnAbort(ctx.signal);
      },
    });
    const dropped = latch<string>();
    w.on('dropped', (lease) => dropped.resolve(lease.lease_id));
    await w.start();
    gw.send(gw.lease(1, { files: { image: files.add('a.png', randomBytes(100), 'image/png') } }));
    gw.send(gw.lease(2, { files: { image: files.add('b.png', randomBytes(100), 'image/png') } }));
    await waitFor('both files fetched', () => fetched.size === 2);
    assert.equal(readdirSync(tmpDir).length, 2, 'a folder per lease');
    gw.send({ type: 'cancel', lease_id: 'lse_1', run_id: 'run_1' });
    await waitFor('the canceled lease to report', () => failOf('lse_1')?.code === 'canceled');
    assert.equal(existsSync(fetched.get('p1')!), false);
    assert.equal(existsSync(fetched.get('p2')!), true, 'the other lease keeps its file');
    gw.sockets[0].terminate();
    assert.equal(await dropped.promise, 'lse_2');
    await waitFor('the lost lease to be cleaned up', () => readdirSync(tmpDir).length === 0);
  });
});

// ---- against the real gateway -------------------------------------------------------------

describe('worker SDK against a gateway', function () {
  let prefix: string;
  let dataDir: string;
  let env: Record<string, string>;
  let gw: TestGateway;
  let key: string;
  const workers: SwitchyardWorker[] = [];
  const children: ChildProcess[] = [];

  const worker = (o: Partial<SwitchyardWorkerOptions> & Pick<SwitchyardWorkerOptions, 'handler' | 'token'>) => {
    const w = new SwitchyardWorker({ gateway: gw.url, kinds: [KIND], logger: silentLogger, reconnect: { initialDelayMs: 50, maxDelayMs: 500 }, ...o });
    workers.push(w);
    return w;
  };

  beforeEach(async () => {
    prefix = uniquePrefix('worker-sdk');
    dataDir = mkdtempSync(path.join(os.tmpdir(), 'sy-worker-sdk-'));
    // A fixed port: with PORT=0 the gateway's upload_url and artifact URLs carry port 0 (see report).
    env = { PORT: String(await freePort()), HEARTBEAT_MS: '200', LEASE_TTL_MS: '2000', DATA_DIR: dataDir };
    gw = await new TestGateway(prefix, env).start();
    key = (await gw.account(1000)).key;
  });

  afterEach(async () => {
    for (const child of children.splice(0)) if (child.exitCode === null) child.kill('SIGKILL');
    await Promise.all(workers.splice(0).map((w) => w.stop({ timeoutMs: 0 })));
    await gw.stop();
    await cleanupPrefix(prefix);
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('runs a submitted job: progress shows while running, the artifact is uploaded and downloadable from output.urls', async () => {
    const token = await gw.workerToken('open');
    const release = latch();
    const png = randomBytes(50_000);
    const seenInput: unknown[] = [];
    const w = worker({
      token,
      handler: async (kind, input, ctx) => {
        assert.equal(kind, KIND);
        seenInput.push(input);
        ctx.progress(0.5, 'half way');
        ctx.log('sampling');
        await release.promise;
        return { artifacts: [{ name: 'lighthouse.png', contentType: 'image/png', data: png }], extra: { seed: 7 } };
      },
    });
    const completed = latch<Record<string, unknown>>();
    w.on('completed', (_lease, output) => completed.resolve(output));
    await w.start();
    assert.match(w.workerId ?? '', /^wkr_/);

    const sub = await gw.submit(key, { kind: KIND, input: { prompt: 'a lighthouse at dusk' } });
    assert.equal(sub.status, 202, sub.text);
    const running = await waitJob(gw, key, sub.body.run_id, (j) => j.status === 'running' && j.progress === 0.5);
    assert.equal(running.terminal, false);
    const listed = await gw.request('GET', '/v1/jobs?status=running', { key });
    assert.equal(listed.body.data.find((j: any) => j.run_id === sub.body.run_id)?.progress, 0.5);

    release.resolve();
    const job = await waitJob(gw, key, sub.body.run_id);
    assert.equal(job.status, 'succeeded', JSON.stringify(job));
    assert.deepEqual(seenInput, [{ prompt: 'a lighthouse at dusk' }]);
    assert.equal(job.attempts, 1);
    assert.equal(job.output.seed, 7);
    assert.equal(job.output.urls.length, 1);
    assert.deepEqual((await completed.promise).urls, job.output.urls);
    const file = await fetch(job.output.urls[0]);
    assert.equal(file.status, 200);
    assert.equal(file.headers.get('content-type'), 'image/png');
    assert.ok(Buffer.from(await file.arrayBuffer()).equals(png), 'the downloaded bytes are the uploaded ones');
  });

  it('cancel of a running job reaches the handler signal; the job ends canceled and its credits come back', async () => {
    const token = await gw.workerToken('open');
    const started = latch();
    const aborted = latch<unknown>();
    const w = worker({
      token,
      handler: async (_k, _i, ctx) => {
        started.resolve();
        return rejectOnAbort(ctx.signal).catch((err) => {
          aborted.resolve(err);
          throw err;
        });
      },
    });
    const failed = latch<{ code: string }>();
    w.on('failed', (_lease, error) => failed.resolve(error));
    await w.start();
    const before = await credits(gw, key);
    const sub = await gw.submit(key);
    assert.equal(sub.status, 202, sub.text);
    await started.promise;
    assert.ok((await credits(gw, key)) < before, 'credits are reserved while it runs');
    const cancel = await gw.request('POST', `/v1/jobs/${sub.body.run_id}/cancel`, { key });
    assert.equal(cancel.status, 200, cancel.text);
    const reason = (await aborted.promise) as Error;
    assert.equal(reason.name, 'AbortError');
    const job = await waitJob(gw, key, sub.body.run_id);
    assert.equal(job.status, 'canceled', JSON.stringify(job));
    assert.equal(job.error.code, 'canceled');
    assert.equal((await failed.promise).code, 'canceled');
    assert.equal(await credits(gw, key), before);
  });

  it('a retryable handler error is retried with attempts counting up; a non-retryable one fails the job', async () => {
    const token = await gw.workerToken('open');
    const calls = new Map<string, number>();
    const w = worker({
      token,
      slots: 2,
      handler: async (_k, input) => {
        const prompt = input.prompt as string;
        const n = (calls.get(prompt) ?? 0) + 1;
        calls.set(prompt, n);
        if (prompt === 'flaky' && n === 1) throw Object.assign(new Error('CUDA out of memory'), { code: 'gpu_oom', retryable: true });
        if (prompt === 'refused') throw Object.assign(new Error('the prompt is not allowed'), { code: 'bad_prompt', retryable: false });
        return artifact('out.png', Buffer.from(prompt));
      },
    });
    await w.start();
    const flaky = await gw.submit(key, { kind: KIND, input: { prompt: 'flaky' } });
    const refused = await gw.submit(key, { kind: KIND, input: { prompt: 'refused' } });
    const ok = await waitJob(gw, key, flaky.body.run_id);
    assert.equal(ok.status, 'succeeded', JSON.stringify(ok));
    assert.equal(ok.attempts, 2);
    assert.equal(calls.get('flaky'), 2);
    const bad = await waitJob(gw, key, refused.body.run_id);
    assert.equal(bad.status, 'failed', JSON.stringify(bad));
    assert.equal(bad.attempts, 1);
    // A handler's own code, outside the run error codes (docs/jobs.md), is recorded as engine_error beside it.
    assert.deepEqual(bad.error, { code: 'engine_error', reported_code: 'bad_prompt', message: 'the prompt is not allowed', retryable: false, attempt: 1 });
  });

  it('reconnects after the gateway restarts: the lease lost with the connection is aborted, and the run is retried once registered again', async () => {
    const token = await gw.workerToken('open');
    const first = latch();
    const aborted = latch<unknown>();
    let calls = 0;
    const w = worker({
      token,
      handler: async (_k, _i, ctx) => {
        if (++calls === 1) {
          first.resolve();
          return rejectOnAbort(ctx.signal).catch((err) => {
            aborted.resolve(err);
            throw err;
          });
        }
        return artifact('again.png', Buffer.from('second attempt'));
      },
    });
    const registrations: string[] = [];
    const disconnects: Array<number | null> = [];
    const dropped: string[] = [];
    w.on('registered', (info) => registrations.push(info.worker_id));
    w.on('disconnected', (info) => disconnects.push(info.reconnectInMs));
    w.on('dropped', (lease) => dropped.push(lease.run_id));
    await w.start();
    const sub = await gw.submit(key);
    await first.promise;

    await gw.stop();
    assert.equal(((await aborted.promise) as Error).name, 'AbortError');
    await waitFor('the worker to notice', () => disconnects.length >= 1);
    assert.ok(disconnects.every((d) => typeof d === 'number'), 'it plans to reconnect');
    gw = await new TestGateway(prefix, env).start();

    await waitFor('a second registration', () => registrations.length >= 2);
    assert.notEqual(registrations[1], registrations[0]);
    const job = await waitJob(gw, key, sub.body.run_id);
    assert.equal(job.status, 'succeeded', JSON.stringify(job));
    assert.equal(job.attempts, 2);
    assert.deepEqual(dropped, [sub.body.run_id]);
    const file = await fetch(job.output.urls[0]);
    assert.equal(await file.text(), 'second attempt');
  });

  it('heartbeats keep a lease alive past LEASE_TTL_MS', async () => {
    const token = await gw.workerToken('open');
    const w = worker({
      token,
      handler: async (_k, _i, ctx) => {
        for (let i = 1; i <= 5; i++) {
          await sleep(600); // 3 s in all, with LEASE_TTL_MS=2000
          ctx.progress(i / 5);
        }
        return artifact('slow.png', Buffer.from('slow'));
      },
    });
    await w.start();
    const sub = await gw.submit(key);
    const job = await waitJob(gw, key, sub.body.run_id);
    assert.equal(job.status, 'succeeded', JSON.stringify(job));
    assert.equal(job.attempts, 1);
  });

  it('never runs more than `slots` handlers at once under a burst', async () => {
    const token = await gw.workerToken('open');
    const subs = await Promise.all(Array.from({ length: 8 }, (_, i) => gw.submit(key, { kind: KIND, input: { prompt: `burst ${i}` } })));
    for (const s of subs) assert.equal(s.status, 202, s.text);
    let now = 0;
    let max = 0;
    const w = worker({
      token,
      slots: 2,
      handler: async (_k, input) => {
        now++;
        max = Math.max(max, now);
        await sleep(50);
        now--;
        return artifact('b.png', Buffer.from(String(input.prompt)));
      },
    });
    await w.start();
    for (const s of subs) assert.equal((await waitJob(gw, key, s.body.run_id)).status, 'succeeded');
    assert.equal(max, 2);
  });

  it("a token whose trust is open cannot register a trusted worker: start() rejects with the gateway's reason", async () => {
    const operator = await gw.workerToken('open');
    const mineToken = await gw.accountWorkerToken(key);
    for (const token of [operator, mineToken]) {
      const w = worker({ token, tier: 'trusted', handler: async () => ({ artifacts: [] }) });
      const refused: WorkerRefusedError[] = [];
      w.on('refused', (e) => refused.push(e));
      await assert.rejects(w.start(), (err: unknown) => {
        assert.ok(err instanceof WorkerRefusedError);
        assert.equal(err.status, 4403);
        assert.equal(err.code, 'forbidden');
        assert.match(err.message, /trust is open/);
        return true;
      });
      assert.equal(refused.length, 1);
      await assert.rejects(w.wait(), WorkerRefusedError);
    }
    // ... while a trusted operator's token can.
    const trusted = worker({ token: await gw.workerToken('trusted'), tier: 'trusted', handler: async () => ({ artifacts: [] }) });
    await trusted.start();
    assert.ok(trusted.connected);
  });

  it('a bad token, a private tier on a gateway without an attestation verifier and an unknown kind are refused for good, not retried', async () => {
    const bad = worker({ token: 'swt_notarealtoken', handler: async () => ({ artifacts: [] }) });
    await assert.rejects(bad.start(), (err: unknown) => err instanceof WorkerRefusedError && err.status === 401 && err.code === 'unauthorized');
    const token = await gw.workerToken('trusted');
    assert.throws(() => worker({ token, tier: 'private', handler: async () => ({ artifacts: [] }) }), /attestation/, 'a private worker must be able to attest');
    // This gateway has no ATTESTATION_JWKS: it cannot check evidence, so it takes no private worker.
    const priv = worker({ token, tier: 'private', handler: async () => ({ artifacts: [] }), attestation: { evidence: async () => ({ token: 'unused', gpus: {} }) } });
    await assert.rejects(priv.start(), (err: unknown) => err instanceof WorkerRefusedError && err.status === 4403 && /attestation/.test(err.message));
    const unknown = worker({ token, kinds: ['inference:does-not-exist'], handler: async () => ({ artifacts: [] }) });
    await assert.rejects(unknown.start(), (err: unknown) => err instanceof WorkerRefusedError && err.code === 'bad_frame' && /kinds/.test(err.message));
  });

  it('the CLI worker (demo engine) runs a job and exits 0 on SIGTERM', async () => {
    const token = await gw.workerToken('open');
    const child = spawn(
      process.execPath,
      ['api/bin/switchyard.mjs', 'worker', '--gateway', gw.url, '--token', token, '--kinds', KIND, '--tier', 'open', '--slots', '2', '--engine', 'demo', '--demo-delay-ms', '0'],
      { env: { ...process.env, REDIS_URL, LOG_LEVEL: 'info', SWITCHYARD_WORKER_TOKEN: '' }, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    children.push(child);
    let stderr = '';
    child.stderr!.on('data', (d) => (stderr += d));
    child.stdout!.on('data', (d) => (stderr += d));
    const exited = new Promise<number | null>((r) => child.on('exit', (code) => r(code)));

    const sub = await gw.submit(key, { kind: KIND, input: { prompt: 'a lighthouse', width: 64, height: 64 } });
    assert.equal(sub.status, 202, sub.text);
    const job = await waitJob(gw, key, sub.body.run_id).catch((err: Error) => {
      throw new Error(`${err.message}\nworker output:\n${stderr}`);
    });
    assert.equal(job.status, 'succeeded', `${JSON.stringify(job)}\n${stderr}`);
    const file = await fetch(job.output.urls[0]);
    assert.equal(file.status, 200);
    assert.match(file.headers.get('content-type') ?? '', /^image\//);
    assert.ok((await file.arrayBuffer()).byteLength > 0);
    assert.match(stderr, /registered/);

    child.kill('SIGTERM');
    const code = await Promise.race([exited, sleep(DEADLINE_MS).then(() => 'timeout')]);
    assert.equal(code, 0, stderr);
  });

  it("the CLI worker surfaces the gateway's refusal of --tier private and exits non-zero; bad flags exit 2", async function () {
    // Nine CLI processes, each loading the TypeScript sources: two at a time, and no timer of
    // their own (a timer that kills a child slow to start on a loaded machine made this flaky);
    // mocha's timeout is the only limit and the children are killed when the test ends.
    this.timeout(120_000);
    const token = await gw.workerToken('trusted');
    const run = promisify(execFile);
    const stop = new AbortController();
    const cli = async (args: string[]) =>
      run(process.execPath, ['api/bin/switchyard.mjs', 'worker', ...args], { env: { ...process.env, LOG_LEVEL: 'warn', SWITCHYARD_WORKER_TOKEN: '' }, signal: stop.signal }).then(
        (r) => ({ code: 0 as number | null, signal: null as string | null, stderr: r.stderr }),
        (e: { code: number | null; signal: string | null; stderr: string }) => ({ code: e.code, signal: e.signal, stderr: e.stderr }),
      );
    const twoAtATime = async <T, R>(items: T[], fn: (item: T) => Promise<R>): Promise<R[]> => {
      const out: R[] = [];
      for (let i = 0; i < items.length; i += 2) out.push(...(await Promise.all(items.slice(i, i + 2).map(fn))));
      return out;
    };
    const cases: Array<[string[], RegExp]> = [
      [['--token', token, '--kinds', KIND], /--gateway/],
      [['--gateway', gw.url, '--kinds', KIND], /--token/],
      [['--gateway', 'ftp://gw', '--token', token, '--kinds', KIND], /--gateway must be an http/],
      [['--gateway', gw.url, '--token', token, '--kinds', 'inference:nope'], /unknown kind inference:nope/],
      [['--gateway', gw.url, '--token', token, '--kinds', KIND, '--slots', '0'], /--slots/],
      [['--gateway', gw.url, '--token', token, '--kinds', KIND, '--engine', 'sdxl'], /unknown engine/],
      [['--gateway', gw.url, '--token', token, '--kinds', KIND, '--demo-delay-ms=-5'], /--demo-delay-ms/],
    ];
    cases.push([['--gateway', gw.url, '--token', token, '--kinds', KIND, '--tier', 'private'], /--attestation-key/]);
    const { keyFile } = await devVerifier(dataDir);
    try {
      const [priv, ...results] = await twoAtATime(
        [['--gateway', gw.url, '--token', token, '--kinds', 'all', '--tier', 'private', '--attestation-key', keyFile, '--slots', '1', '--engine', 'demo'], ...cases.map(([args]) => args)],
        cli,
      );
      assert.equal(priv.code, 1, `signal ${priv.signal}: ${priv.stderr}`);
      assert.match(priv.stderr, /attestation/);
      cases.forEach(([args, message], i) => {
        assert.equal(results[i].code, 2, `${args.join(' ')} (signal ${results[i].signal}): ${results[i].stderr}`);
        assert.match(results[i].stderr, message);
      });
    } finally {
      stop.abort();
    }
  });
});

// ---- the gateway as docs/worker-protocol.md describes it ----------------------------------

describe('worker protocol conformance seen from a worker', () => {
  let prefix: string;
  let gw: TestGateway;
  let dataDir: string;
  beforeEach(async () => {
    prefix = uniquePrefix('worker-sdk-proto');
    dataDir = mkdtempSync(path.join(os.tmpdir(), 'sy-worker-sdk-'));
  });
  afterEach(async () => {
    await gw?.stop();
    await cleanupPrefix(prefix);
    rmSync(dataDir, { recursive: true, force: true });
  });

  /** Opens a raw worker socket, sends `register`, returns the first frame the gateway answers. */
  async function rawRegister(token: string, register: Record<string, unknown>): Promise<Record<string, any>> {
    const ws = new WebSocket(workerSocketUrl(gw.url), { headers: { authorization: `Bearer ${token}` } });
    try {
      return await new Promise((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error('no answer to register in 5 s')), 5_000);
        ws.on('open', () => ws.send(JSON.stringify(register)));
        ws.on('message', (d) => {
          clearTimeout(timer);
          resolve(JSON.parse(d.toString()));
        });
        ws.on('error', reject);
      });
    } finally {
      ws.terminate();
    }
  }

  it('names the worker itself: a register frame may not choose its worker_id', async () => {
    gw = await new TestGateway(prefix, { DATA_DIR: dataDir }).start();
    const token = await gw.workerToken('open');
    const refused = await rawRegister(token, { type: 'register', protocol: [1], kinds: [KIND], tier: 'open', slots: 1, worker_id: 'my-stable-worker-1' });
    assert.equal(refused.code, 'bad_frame', JSON.stringify(refused));
    const answer = await rawRegister(token, { type: 'register', protocol: [1], kinds: [KIND], tier: 'open', slots: 1 });
    assert.match(answer.worker_id, /^wkr_/);
  });

  it('closes the socket with 4400 after refusing a malformed register frame (not only at the 10 s register timeout)', async () => {
    gw = await new TestGateway(prefix, { DATA_DIR: dataDir }).start();
    const token = await gw.workerToken('open');
    const ws = new WebSocket(workerSocketUrl(gw.url), { headers: { authorization: `Bearer ${token}` } });
    const frames: Array<Record<string, any>> = [];
    ws.on('message', (d) => frames.push(JSON.parse(d.toString())));
    ws.on('open', () => ws.send(JSON.stringify({ type: 'register', protocol: [1], kinds: ['inference:does-not-exist'], tier: 'open', slots: 1 })));
    const closed = new Promise<number>((r) => ws.on('close', (code) => r(code)));
    try {
      const code = await Promise.race([closed, sleep(3_000).then(() => 'still open 3 s later')]);
      assert.equal(frames[0]?.type, 'error');
      assert.equal(code, 4400);
    } finally {
      ws.terminate();
    }
  });

  it("puts the gateway's bound address in a lease's upload_url when started with PORT=0", async () => {
    gw = await new TestGateway(prefix, { DATA_DIR: dataDir, HEARTBEAT_MS: '200' }).start(); // the harness default: PORT=0
    const token = await gw.workerToken('open');
    const key = (await gw.account(100)).key;
    const lease = latch<string>();
    const w = new SwitchyardWorker({ gateway: gw.url, token, kinds: [KIND], logger: silentLogger, handler: async () => ({ artifacts: [] }) });
    w.on('lease', (l) => lease.resolve(l.upload_url));
    try {
      await w.start();
      await gw.submit(key);
      const uploadUrl = await lease.promise;
      assert.equal(new URL(uploadUrl).origin, new URL(gw.url).origin, `upload_url ${uploadUrl} vs gateway ${gw.url}`);
    } finally {
      await w.stop({ timeoutMs: 0 });
    }
  });
});
