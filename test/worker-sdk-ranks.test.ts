import assert from 'node:assert/strict';
import { createDemoEngine } from '../sdk/engines/demo/index.js';
import { imageWhole } from '../sdk/engines/demo/ranked-image.js';
import { generateWhole } from '../sdk/engines/demo/ranked-llm.js';
import { decodePipelineFrame } from '../sdk/protocol/index.js';
import { SwitchyardWorker, silentLogger, type Engine, type EngineContext, type WorkerLogger } from '../sdk/worker/index.js';
import { until } from './helpers/harness.js';
import { RankRelayGateway, type Frame } from './helpers/rank-relay-gateway.js';

/**
 * The worker SDK serving ranks of a ranked model (protocol 6, docs/worker-protocol.md, "Ranks"):
 * SDK workers against a scripted gateway that leases pipelines and relays the binary frames
 * between them as the gateway does (test/helpers/rank-relay-gateway.ts).
 */

const LLM = 'inference:llm:text-generate';
const IMAGE = 'inference:image:generate';
const text = (b: Uint8Array) => Buffer.from(b).toString('utf8');

/** A logger that keeps what it is told, to tell an info line from a warning. */
function recordingLogger(): WorkerLogger & { lines: Array<{ level: string; message: string; fields?: Record<string, unknown> }> } {
  const lines: Array<{ level: string; message: string; fields?: Record<string, unknown> }> = [];
  const at = (level: string) => (message: string, fields?: Record<string, unknown>) => void lines.push({ level, message, fields });
  return { lines, debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error') };
}

/** What the whole model gives, called as a worker would call it, without a gateway. */
async function runWhole(kind: string, input: Record<string, unknown>) {
  let streamed = '';
  const ctx: EngineContext = { signal: new AbortController().signal, progress() {}, log() {}, output: (d) => void (streamed += d), inputFile: () => Promise.reject(new Error('no files')) };
  const result = await createDemoEngine({ delayMs: 0 })(kind, input, ctx);
  return { result, streamed };
}

describe('worker SDK: rank leases (protocol 6)', function () {
  this.timeout(60_000);
  let gw: RankRelayGateway;
  let workers: SwitchyardWorker[] = [];

  /** Starts a worker serving rank `index` of `count` of `model`; workers are numbered in the order they start. */
  async function startWorker(opts: { kind: string; model: string; index: number; count: number; handler?: Engine; logger?: WorkerLogger; slots?: number }): Promise<SwitchyardWorker> {
    const w = new SwitchyardWorker({
      gateway: gw.url,
      token: 'swt_test',
      kinds: [opts.kind],
      slots: opts.slots ?? 1,
      handler: opts.handler ?? createDemoEngine({ delayMs: 0 }),
      models: { [opts.kind]: [{ id: opts.model, rank: { index: opts.index, count: opts.count } }] },
      logger: opts.logger ?? silentLogger,
    });
    workers.push(w);
    await w.start();
    return w;
  }

  beforeEach(async () => {
    gw = await new RankRelayGateway().start();
  });
  afterEach(async () => {
    await Promise.all(workers.map((w) => w.stop({ timeoutMs: 0 })));
    workers = [];
    await gw.stop();
  });

  const finals = async (leases: Frame[]) => until('every rank reported', async () => (leases.every((l) => gw.final(l.lease_id)) ? leases.map((l) => gw.final(l.lease_id)!) : null));

  it('three workers, one rank of demo-ranked-llm each, write the output of the model run whole, byte for byte; ranks 0 and 1 complete with urls []', async () => {
    for (let index = 0; index < 3; index++) await startWorker({ kind: LLM, model: 'demo-ranked-llm', index, count: 3 });
    assert.deepEqual(gw.registers.map((r) => r.models[LLM]), [0, 1, 2].map((index) => [{ id: 'demo-ranked-llm', rank: { index, count: 3 } }]));
    // One stops after max_tokens, one at the end token (docs/ranks.md pins both).
    for (const [input, finish] of [[{ prompt: 'hello world', max_tokens: 12 }, 'length'], [{ prompt: 'in cat' }, 'stop']] as const) {
      const job = { ...input, model: 'demo-ranked-llm' };
      const pipeline = gw.pipeline({ kind: LLM, model: 'demo-ranked-llm', input: job, workers: [0, 1, 2] });
      const leases = pipeline.ranks.map((r) => r.frame);
      const [first, middle, last] = await finals(leases);
      assert.deepEqual(first, { type: 'complete', output: { urls: [] }, lease_id: leases[0].lease_id, fence: 1, worker: 0 });
      assert.deepEqual(middle, { type: 'complete', output: { urls: [] }, lease_id: leases[1].lease_id, fence: 1, worker: 1 });
      assert.equal(last.type, 'complete', JSON.stringify(last));

      const whole = await runWhole(LLM, job);
      const { urls, ...fields } = last.output;
      assert.deepEqual(urls, []);
      assert.equal(JSON.stringify(fields), JSON.stringify(whole.result.extra));
      const reference = generateWhole(input.prompt, 'max_tokens' in input ? input.max_tokens : 256);
      assert.ok(Buffer.from(fields.text).equals(Buffer.from(reference.text)));
      assert.equal(fields.finish_reason, finish);
      // The last rank streams the text; the others stream nothing.
      const outputs = (leaseId: string) => gw.reportsOf(leaseId).filter((f) => f.type === 'output');
      assert.equal(outputs(leases[2].lease_id).map((f) => f.delta).join(''), whole.streamed);
      assert.deepEqual([...outputs(leases[0].lease_id), ...outputs(leases[1].lease_id)], []);
      // Each rank's frames are numbered 1, 2, 3... and only its last carries the end flag.
      for (let rank = 0; rank < 3; rank++) {
        const sent = gw.relayed.filter((f) => f.pipeline === pipeline.id && f.rank === rank).map((f) => f.frame);
        assert.ok(sent.length >= 2, `rank ${rank} sent ${sent.length} frames`);
        assert.deepEqual(sent.map((f) => f.seq), sent.map((_, i) => i + 1));
        assert.deepEqual(sent.map((f) => f.end), sent.map((_, i) => i === sent.length - 1));
      }
      // One token frame back to rank 0 per token generated.
      assert.equal(gw.relayed.filter((f) => f.pipeline === pipeline.id && f.rank === 2 && !f.frame.end).length, reference.tokens.length);
    }
    assert.deepEqual(gw.violations, []);
    assert.deepEqual(workers.map((w) => w.activeLeases), [0, 0, 0]);
  });

  it('two workers of demo-ranked-image make the PNG of the model run whole; only the last rank uploads', async () => {
    for (let index = 0; index < 2; index++) await startWorker({ kind: IMAGE, model: 'demo-ranked-image', index, count: 2 });
    const prompt = 'a red fox in the snow';
    const pipeline = gw.pipeline({ kind: IMAGE, model: 'demo-ranked-image', input: { prompt, model: 'demo-ranked-image' }, workers: [0, 1] });
    const [first, last] = await finals(pipeline.ranks.map((r) => r.frame));
    assert.deepEqual(first.output, { urls: [] });
    assert.equal(last.type, 'complete', JSON.stringify(last));
    const lastLease = pipeline.ranks[1].frame.lease_id;
    assert.deepEqual(last.output, { width: 64, height: 64, urls: [`${gw.url}/artifacts/${lastLease}/image.png`] });
    assert.deepEqual([...gw.uploads.keys()], [`${lastLease}/image.png`]);
    assert.ok(gw.uploads.get(`${lastLease}/image.png`)!.equals(imageWhole(prompt)));
    // The same job served whole by the demo engine: the same picture.
    assert.ok((await runWhole(IMAGE, { prompt, model: 'demo-ranked-image' })).result.artifacts[0].data.equals(imageWhole(prompt)));
    assert.deepEqual(gw.violations, []);
  });

  it('numbers the frames it sends 1, 2, 3 under its own lease id and fence; end() sends one end frame, however often called, and send() after it rejects', async () => {
    let afterEnd: unknown;
    await startWorker({
      kind: LLM,
      model: 'tiny',
      index: 0,
      count: 2,
      handler: async (_kind, _input, ctx) => {
        for (const p of ['a', 'b', 'c']) await ctx.rank!.send(Buffer.from(p));
        await Promise.all([ctx.rank!.end(), ctx.rank!.end()]);
        afterEnd = await ctx.rank!.send(Buffer.from('d')).catch((err: Error) => err);
        return { artifacts: [] };
      },
    });
    gw.relay = false;
    const pipeline = gw.pipeline({ kind: LLM, model: 'tiny', input: { prompt: 'x' }, workers: [0, 0], fence: 7, deliver: [0] });
    const lease = pipeline.ranks[0].frame;
    await until('the complete', async () => gw.final(lease.lease_id));
    const frames = gw.binary.map((b) => decodePipelineFrame(b.data));
    assert.deepEqual(
      frames.map((f) => [f.leaseId, f.fence, f.seq, f.end, text(f.payload)]),
      [[lease.lease_id, 7, 1, false, 'a'], [lease.lease_id, 7, 2, false, 'b'], [lease.lease_id, 7, 3, false, 'c'], [lease.lease_id, 7, 4, true, '']],
    );
    assert.match(String(afterEnd), /send\(\) after end\(\)/);
    assert.deepEqual(gw.final(lease.lease_id)!.output, { urls: [] });
  });

  it("keeps the frames that arrive before the handler reads them, in order; the frame flagged end ends the handler's iterable", async () => {
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    await startWorker({
      kind: LLM,
      model: 'tiny',
      index: 1,
      count: 2,
      handler: async (_kind, _input, ctx) => {
        await gate;
        const got: string[] = [];
        for await (const frame of ctx.rank!.frames) got.push(text(frame));
        return { artifacts: [], extra: { got, rank: { ...ctx.rank!, frames: undefined } } };
      },
    });
    gw.relay = false;
    const pipeline = gw.pipeline({ kind: LLM, model: 'tiny', input: { prompt: 'x' }, workers: [0, 0], fence: 3, deliver: [1] });
    const lease = pipeline.ranks[1].frame;
    const frame = (seq: number, payload: string, end = false, leaseId = lease.lease_id) => ({ leaseId, fence: 3, seq, end, payload: Buffer.from(payload) });
    gw.sendFrame(0, frame(1, 'a'));
    gw.sockets[0].send(Buffer.from('not a pipeline frame'));
    gw.sendFrame(0, frame(1, 'other lease', false, `lse_${'0'.repeat(32)}`));
    gw.sendFrame(0, frame(2, 'b'));
    gw.sendFrame(0, frame(3, 'c', true));
    // After the end: not delivered.
    gw.sendFrame(0, frame(4, 'late'));
    await gw.barrier(0);
    release();
    const final = await until('the complete', async () => gw.final(lease.lease_id));
    assert.equal(final.type, 'complete', JSON.stringify(final));
    assert.deepEqual(final.output.got, ['a', 'b', 'c']);
    assert.deepEqual(final.output.rank, { index: 1, count: 2, pipelineId: pipeline.id, model: 'tiny', workers: ['wrk_0', 'wrk_0'], first: false, last: true });
  });

  it('a cancel with reason pipeline_ended aborts the handler (its frames throw an AbortError) and nothing is reported for the lease', async () => {
    const logger = recordingLogger();
    let seen: { name: string; aborted: boolean } | undefined;
    const w = await startWorker({
      kind: LLM,
      model: 'tiny',
      index: 1,
      count: 2,
      logger,
      handler: async (_kind, _input, ctx) => {
        try {
          for await (const _ of ctx.rank!.frames);
        } catch (err) {
          seen = { name: (err as Error).name, aborted: ctx.signal.aborted };
          throw err;
        }
        return { artifacts: [] };
      },
    });
    gw.relay = false;
    const lease = gw.pipeline({ kind: LLM, model: 'tiny', input: {}, workers: [0, 0], deliver: [1] }).ranks[1].frame;
    await until('the handler is running', async () => w.running === 1);
    let dropped: string | undefined;
    w.once('dropped', (_info, reason) => (dropped = reason));
    gw.send(0, { type: 'cancel', lease_id: lease.lease_id, run_id: lease.run_id, reason: 'pipeline_ended', message: 'rank 0 failed: out of memory' });
    // Dropped, or (wrongly) reported: either ends the wait.
    await until('the lease ended', async () => dropped ?? gw.final(lease.lease_id));
    assert.equal(dropped, 'the pipeline ended: rank 0 failed: out of memory');
    assert.deepEqual(seen, { name: 'AbortError', aborted: true });
    // Whatever the worker sent before this models frame has reached the gateway.
    w.setModels(w.models!);
    await until('the models frame', async () => gw.reports.some((f) => f.type === 'models'));
    assert.deepEqual(gw.reportsOf(lease.lease_id), []);
    assert.equal(w.activeLeases, 0);
    assert.ok(logger.lines.some((l) => l.level === 'info' && l.message.includes('rank 0 failed: out of memory')), JSON.stringify(logger.lines));
    assert.deepEqual(logger.lines.filter((l) => l.level === 'warn' || l.level === 'error'), []);
  });

  it('a cancel without a reason fails the rank lease as canceled, as any lease', async () => {
    const w = await startWorker({
      kind: LLM,
      model: 'tiny',
      index: 1,
      count: 2,
      handler: async (_kind, _input, ctx) => {
        for await (const _ of ctx.rank!.frames);
        return { artifacts: [] };
      },
    });
    const lease = gw.pipeline({ kind: LLM, model: 'tiny', input: {}, workers: [0, 0], deliver: [1] }).ranks[1].frame;
    await until('the handler is running', async () => w.running === 1);
    gw.send(0, { type: 'cancel', lease_id: lease.lease_id, run_id: lease.run_id });
    const final = await until('the fail', async () => gw.final(lease.lease_id));
    assert.deepEqual(final.error, { code: 'canceled', message: 'canceled by the caller', retryable: false });
  });

  it('a rank before the last that returns artifacts fails bad_result rather than losing them; nothing is uploaded', async () => {
    await startWorker({
      kind: IMAGE,
      model: 'tiny',
      index: 0,
      count: 2,
      handler: async () => ({ artifacts: [{ name: 'x.png', contentType: 'image/png', data: Buffer.from('png') }] }),
    });
    const lease = gw.pipeline({ kind: IMAGE, model: 'tiny', input: {}, workers: [0, 0], deliver: [0] }).ranks[0].frame;
    const final = await until('the fail', async () => gw.final(lease.lease_id));
    assert.equal(final.type, 'fail');
    assert.equal(final.error.code, 'bad_result');
    assert.equal(final.error.retryable, false);
    assert.match(final.error.message, /rank 0 of 2 returned 1 artifact\(s\): only the last rank's artifacts are the run's/);
    assert.equal(gw.uploads.size, 0);
  });

  it('a frame out of seq order breaks the incoming stream: the read throws and the lease fails pipeline_broken', async () => {
    await startWorker({
      kind: LLM,
      model: 'tiny',
      index: 1,
      count: 2,
      handler: async (_kind, _input, ctx) => {
        for await (const _ of ctx.rank!.frames);
        return { artifacts: [] };
      },
    });
    gw.relay = false;
    const lease = gw.pipeline({ kind: LLM, model: 'tiny', input: {}, workers: [0, 0], deliver: [1] }).ranks[1].frame;
    gw.sendFrame(0, { leaseId: lease.lease_id, fence: 1, seq: 1, end: false, payload: Buffer.from('a') });
    gw.sendFrame(0, { leaseId: lease.lease_id, fence: 1, seq: 3, end: false, payload: Buffer.from('c') });
    const final = await until('the fail', async () => gw.final(lease.lease_id));
    assert.equal(final.error.code, 'pipeline_broken');
    assert.match(final.error.message, /pipeline frame 3 arrived where 2 was next/);
  });

  it('a rank lease does not move on reconnect: it is lost with the old socket and not claimed on the new one', async () => {
    let seen: string | undefined;
    const w = await startWorker({
      kind: LLM,
      model: 'tiny',
      index: 1,
      count: 2,
      handler: async (_kind, _input, ctx) => {
        try {
          for await (const _ of ctx.rank!.frames);
        } catch (err) {
          seen = (err as Error).name;
          throw err;
        }
        return { artifacts: [] };
      },
    });
    const lease = gw.pipeline({ kind: LLM, model: 'tiny', input: {}, workers: [0, 0], deliver: [1] }).ranks[1].frame;
    await until('the handler is running', async () => w.running === 1);
    let dropped: string | undefined;
    w.once('dropped', (_info, reason) => (dropped = reason));
    gw.send(0, { type: 'reconnect' });
    await until('the lease ended', async () => dropped ?? gw.final(lease.lease_id));
    assert.match(String(dropped), /a rank lease does not move to another instance/);
    assert.equal(seen, 'AbortError');
    await gw.workers(2);
    assert.equal(gw.registers[1].resume, undefined);
    assert.deepEqual(gw.reportsOf(lease.lease_id), []);
  });
});
