import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { checkModelSchema } from '../models/model-schema.js';
import { fileFields, findKind } from '../models/kinds.js';
import { type CogEngine, type CogEngineOptions, createCogEngine } from '../sdk/engines/cog/index.js';
import type { EngineContext } from '../sdk/engines/types.js';
import { CogServer, type Script, imageModelSchema, textModelSchema } from './helpers/cog-server.js';
import { REDIS_URL, TestGateway, cleanupPrefix, uniquePrefix, until } from './helpers/harness.js';
import { dataUri, samplePng } from './helpers/sample-files.js';
import { runCliWorker } from './helpers/cli-worker.js';

/**
 * The Cog engine (sdk/engines/cog) against a server that speaks Cog's documented HTTP API
 * (test/helpers/cog-server.ts): alone, then as `switchyard worker --engine cog` (real processes
 * of the real bin) in front of a real gateway.
 */

const VIDEO = 'inference:video:generate';
const LLM = 'inference:llm:text-generate';

function kindFields(kindName: string) {
  const kind = findKind(kindName)!;
  const props = (kind.inputSchema.properties ?? {}) as Record<string, Record<string, unknown>>;
  return { properties: props, files: Object.fromEntries(Object.keys(fileFields(kind)).map((f) => [f, props[f]])) };
}

const deferred = () => {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
};

const png = samplePng(8, 5);
const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');

/** A lease context as the worker SDK gives handlers, recording what the engine reports. */
function leaseContext(dir: string, signal = new AbortController().signal) {
  const logs: string[] = [];
  const deltas: string[] = [];
  const ctx: EngineContext = {
    signal,
    progress: () => {},
    log: (l) => void logs.push(l),
    output: (d) => void deltas.push(d),
    inputFile: async (field) => {
      const file = path.join(dir, field);
      await writeFile(file, png);
      return { path: file, size: png.length, contentType: 'image/png', sha256: sha(png) };
    },
  };
  return { ctx, logs, deltas };
}

const rejectsWith = (p: Promise<unknown>, code: string, retryable: boolean, message: RegExp) =>
  assert.rejects(p, (err: any) => {
    assert.equal(err.code, code, String(err));
    assert.equal(err.retryable, retryable);
    assert.match(err.message, message);
    return true;
  });

describe('Cog engine', function () {
  this.timeout(20_000);
  let dir: string;
  const open: Array<CogServer | CogEngine> = [];
  const serve = async (schema = imageModelSchema()) => {
    const server = await new CogServer(schema).start();
    open.push(server);
    return server;
  };
  const engine = async (server: CogServer, over: Partial<CogEngineOptions> = {}) => {
    const e = await createCogEngine({ cogUrl: server.url, kind: VIDEO, kindFields: kindFields(VIDEO), healthIntervalMs: 50, readyTimeoutMs: 5000, ...over });
    open.push(e);
    return e;
  };

  before(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'cog-engine-'));
  });
  afterEach(async () => {
    for (const o of open.splice(0)) await ('close' in o ? o.close() : o.stop()).catch(() => {});
  });
  after(() => rm(dir, { recursive: true, force: true }));

  describe('the advertised model', () => {
    it("is Cog's Input as a schema the gateway takes: ordered, enums inlined, Cog's keywords gone, the kind's file field kept a file", async () => {
      const e = await engine(await serve());
      assert.equal(e.model.id, 'cog', "from info.title, Cog's default");
      const schema = e.model.input_schema as any;
      assert.deepEqual(Object.keys(schema.properties), ['prompt', 'image', 'steps', 'scheduler', 'seed', 'guidance'], 'in x-order, mask left out');
      assert.deepEqual(schema.required, ['prompt', 'image']);
      assert.deepEqual(schema.properties.scheduler, { enum: ['DDIM', 'K_EULER', 'DPMSolverMultistep'], type: 'string', default: 'K_EULER', description: 'The sampler' });
      assert.deepEqual(schema.properties.steps, { type: 'integer', title: 'Steps', default: 20, minimum: 1, maximum: 50 });
      assert.deepEqual(schema.properties.seed, { type: 'integer', title: 'Seed', description: 'Random seed; leave blank to randomize' });
      assert.deepEqual(schema.properties.image['x-switchyard-file'], { accept: ['image/png', 'image/jpeg', 'image/webp'] });
      assert.equal(schema.properties.image.format, undefined);
      assert.doesNotThrow(() => checkModelSchema(findKind(VIDEO)!, schema));
      assert.deepEqual(e.dropped.map((d) => d.field), ['mask']);
    });

    it('leaves out inputs whose type contradicts the kind, and file inputs the kind has no field for', async () => {
      const schema = imageModelSchema() as any;
      schema.components.schemas.Input.properties.fps = { type: 'string', title: 'Fps', 'x-order': 7 };
      const e = await engine(await serve(schema), { modelId: 'acme/video' });
      assert.equal(e.model.id, 'acme/video');
      assert.equal((e.model.input_schema as any).properties.fps, undefined);
      assert.deepEqual(e.dropped.map((d) => d.field).sort(), ['fps', 'mask']);
      assert.doesNotThrow(() => checkModelSchema(findKind(VIDEO)!, e.model.input_schema));
    });
  });

  describe('readiness', () => {
    it('waits while the server is STARTING, and starts once it is READY', async () => {
      const server = await serve();
      server.health = 'STARTING';
      let ready = false;
      const pending = engine(server).then((e) => ((ready = true), e));
      await until('the engine asked again and again', async () => server.healthChecks >= 3);
      assert.equal(ready, false);
      server.health = 'READY';
      await pending;
      assert.ok(ready);
    });

    it('gives up on SETUP_FAILED at once, quoting setup logs', async () => {
      const server = await serve();
      server.health = 'SETUP_FAILED';
      server.setupLogs = 'loading weights\nCUDA out of memory\n';
      await assert.rejects(engine(server, { readyTimeoutMs: 60_000 }), /SETUP_FAILED.*\n[\s\S]*CUDA out of memory/);
    });

    it('gives up after the time allowed when it never becomes READY', async () => {
      const server = await serve();
      server.health = 'STARTING';
      await assert.rejects(engine(server, { readyTimeoutMs: 300 }), /not READY within .* \(last: status STARTING\)/);
    });
  });

  describe('a prediction', () => {
    it("passes the job's Cog inputs, the file as a data URI, and turns logs and output files into log lines and artifacts", async () => {
      const server = await serve();
      const mp4 = Buffer.from('not really an mp4');
      server.files.set('clip.mp4', { type: 'video/mp4', data: mp4 });
      server.files.set('frames.json', { type: 'application/json', data: Buffer.from('{"frames":2}') });
      server.scripts.push({
        steps: [
          { log: 'loading\nstep 1/2' },
          { yield: `data:image/png;base64,${png.toString('base64')}` },
          { log: '\nstep 2/2\n' },
          { yield: `${server.url}/files/clip.mp4` },
          { yield: `${server.url}/files/frames.json` },
        ],
      });
      const e = await engine(server);
      const { ctx, logs, deltas } = leaseContext(dir);
      const result = await e.handler(VIDEO, { prompt: 'a cat', image: 'file_x', steps: 4, scheduler: 'DDIM', model: 'cog', width: 64 }, ctx);
      const sent = server.created[0];
      assert.deepEqual(Object.keys(sent.input).sort(), ['image', 'prompt', 'scheduler', 'steps'], 'only what Cog declares (model and width are not its)');
      assert.equal(sent.input.image, `data:image/png;base64,${png.toString('base64')}`);
      assert.equal(sent.headers.prefer, 'respond-async');
      assert.ok(sent.webhook?.startsWith('http://127.0.0.1:'), sent.webhook);
      assert.deepEqual(logs, ['loading', 'step 1/2', 'step 2/2']);
      assert.deepEqual(deltas, [], 'files are not text');
      assert.deepEqual(result.artifacts.map((a) => [a.name, a.contentType]), [['output-0.png', 'image/png'], ['clip.mp4', 'video/mp4'], ['frames.json', 'application/json']]);
      assert.deepEqual(result.artifacts[0].data, png);
      assert.deepEqual(result.artifacts[1].data, mp4);
      assert.deepEqual(result.extra, { cog_output: ['output-0.png', 'clip.mp4', 'frames.json'] });
    });

    it("streams an iterator's text as output deltas while it runs, and reports the whole text", async () => {
      const server = await serve(textModelSchema());
      const gate = deferred();
      server.scripts.push({ steps: [{ yield: 'Onions' }, { yield: ' bloom' }, { wait: gate.promise }, { yield: ' at dusk' }] });
      const e = await createCogEngine({ cogUrl: server.url, kind: LLM, kindFields: kindFields(LLM), healthIntervalMs: 50 });
      open.push(e);
      assert.equal(e.model.id, 'tiny-llama');
      const { ctx, deltas } = leaseContext(dir);
      const run = e.handler(LLM, { prompt: 'haiku', max_tokens: 8 }, ctx);
      await until('the first deltas arrive before the prediction ends', async () => deltas.length === 2);
      gate.resolve();
      const result = await run;
      assert.deepEqual(deltas, ['Onions', ' bloom', ' at dusk']);
      assert.equal(result.extra?.text, 'Onions bloom at dusk');
      assert.deepEqual(result.artifacts, []);
    });

    it('is cancelled on the server when the lease is', async () => {
      const server = await serve();
      server.scripts.push({ steps: [{ log: 'working\n' }, { wait: new Promise(() => {}) }] });
      const e = await engine(server);
      const ac = new AbortController();
      const { ctx, logs } = leaseContext(dir, ac.signal);
      const run = e.handler(VIDEO, { prompt: 'a cat', image: 'file_x' }, ctx);
      await until('the prediction runs', async () => logs.length === 1);
      ac.abort(new DOMException('canceled', 'AbortError'));
      await assert.rejects(run, { name: 'AbortError' });
      assert.deepEqual(server.cancels, [server.created[0].id]);
      await until('the server stopped it', async () => server.running() === 0);
    });

    it('fails, not retryable, when the prediction fails', async () => {
      const server = await serve();
      server.scripts.push({ steps: [{ log: 'oops\n' }, { fail: 'ValueError: prompt too spicy' }] } satisfies Script);
      const e = await engine(server);
      const { ctx, logs } = leaseContext(dir);
      await rejectsWith(e.handler(VIDEO, { prompt: 'a cat', image: 'file_x' }, ctx), 'prediction_failed', false, /prompt too spicy/);
      assert.deepEqual(logs, ['oops']);
      assert.deepEqual(server.cancels, []);
    });

    it('fails, not retryable, when a report of the prediction is too big to take', async () => {
      const server = await serve();
      server.scripts.push({ steps: [{ yield: `data:image/png;base64,${Buffer.alloc(4096).toString('base64')}` }, { wait: new Promise(() => {}) }] });
      const e = await engine(server, { maxWebhookBytes: 2048 });
      await rejectsWith(e.handler(VIDEO, { prompt: 'a cat', image: 'file_x' }, leaseContext(dir).ctx), 'output_too_large', false, /over 2048 bytes.*--upload-url/);
      assert.deepEqual(server.cancels, [server.created[0].id]);
    });

    it('fails, not retryable, when Cog refuses the input with 422', async () => {
      const server = await serve();
      const e = await engine(server);
      const { ctx } = leaseContext(dir);
      await rejectsWith(e.handler(VIDEO, { prompt: 'a cat', image: 'file_x', steps: 99 }, ctx), 'bad_input', false, /422.*less than or equal to 50/);
    });

    it('fails retryable when all of Cog\'s slots are taken', async () => {
      const server = await serve();
      server.scripts.push({ steps: [{ log: 'working\n' }, { wait: new Promise(() => {}) }] });
      const e = await engine(server);
      const first = leaseContext(dir);
      void e.handler(VIDEO, { prompt: 'a cat', image: 'file_x' }, first.ctx).catch(() => {});
      await until('the first prediction runs', async () => first.logs.length === 1);
      await rejectsWith(e.handler(VIDEO, { prompt: 'a dog', image: 'file_x' }, leaseContext(dir).ctx), 'upstream_unavailable', true, /409.*At capacity/);
    });

    it('fails retryable when the server goes away mid-prediction', async () => {
      const server = await serve();
      server.scripts.push({ steps: [{ log: 'working\n' }, { wait: new Promise(() => {}) }] });
      const e = await engine(server);
      const { ctx, logs } = leaseContext(dir);
      const run = e.handler(VIDEO, { prompt: 'a cat', image: 'file_x' }, ctx);
      await until('the prediction runs', async () => logs.length === 1);
      await server.kill();
      await rejectsWith(run, 'upstream_unavailable', true, /went away/);
    });

    it('fails retryable when Cog cannot reach the webhook', async () => {
      const server = await serve();
      server.scripts.push({ steps: [{ wait: new Promise(() => {}) }] });
      const e = await engine(server, { webhookUrl: 'http://127.0.0.1:9', firstWebhookMs: 200 });
      const { ctx } = leaseContext(dir);
      await rejectsWith(e.handler(VIDEO, { prompt: 'a cat', image: 'file_x' }, ctx), 'upstream_unavailable', true, /no webhook .*--cog-webhook-url/);
      assert.deepEqual(server.cancels, [server.created[0].id], 'the orphan prediction is cancelled');
    });
  });
});

describe('switchyard worker --engine cog', function () {
  // CLI processes load the TypeScript sources: seconds each on a loaded machine.
  this.timeout(120_000);
  const prefix = uniquePrefix('cog-engine-cli');
  const env = { ...process.env, REDIS_URL, LOG_LEVEL: 'warn', SWITCHYARD_WORKER_TOKEN: '' };
  let gw: TestGateway, key: string, token: string;

  const runWorker = (args: string[], whileUp: () => Promise<void>) => runCliWorker({ gateway: gw.url, token, env }, ['--engine', 'cog', ...args], whileUp);

  before(async () => {
    gw = await new TestGateway(prefix).start();
    ({ key } = await gw.account(1000));
    token = await gw.workerToken();
  });
  after(async () => {
    await gw?.stop();
    await cleanupPrefix(prefix);
  });

  it('advertises the model with its input schema, which refuses a typo, and runs jobs end to end with downloadable artifacts', async () => {
    const server = await new CogServer(imageModelSchema()).start();
    try {
      const mp4 = Buffer.from('an mp4, as far as this test cares');
      server.files.set('clip.mp4', { type: 'video/mp4', data: mp4 });
      const frame = samplePng(4, 9);
      server.scripts.push({ steps: [{ log: 'denoising\n' }, { yield: dataUri('image/png', frame) }, { yield: `${server.url}/files/clip.mp4` }] });
      const { code, stderr } = await runWorker(['--cog-url', server.url, '--kinds', VIDEO, '--models', 'acme/video-gen'], async () => {
        const model = await until('the model is in /v1/capabilities', async () => {
          const kind = (await gw.request('GET', '/v1/capabilities', { key })).body.kinds.find((k: { kind: string }) => k.kind === VIDEO);
          return kind.models.find((m: { id: string; workers: number }) => m.id === 'acme/video-gen' && m.workers === 1);
        }, 60_000);
        assert.deepEqual(Object.keys(model.input_schema.properties), ['prompt', 'image', 'steps', 'scheduler', 'seed', 'guidance']);
        assert.equal(model.input_schema.properties.scheduler.default, 'K_EULER');

        const input = { model: 'acme/video-gen', prompt: 'a cat', image: dataUri('image/png', png), steps: 4 };
        const typo = await gw.submit(key, { kind: VIDEO, input: { ...input, stpes: 4 } });
        assert.equal(typo.status, 400, typo.text);
        assert.match(typo.text, /did you mean \\"steps\\"/);
        const tooMany = await gw.submit(key, { kind: VIDEO, input: { ...input, steps: 51 } });
        assert.equal(tooMany.status, 400, 'the bounds of Cog\'s schema are the gateway\'s');

        const res = await gw.submit(key, { kind: VIDEO, input });
        assert.equal(res.status, 202, res.text);
        const job = await until('the job ends', async () => {
          const j = (await gw.request('GET', `/v1/jobs/${res.body.run_id}`, { key })).body;
          return j.terminal ? j : undefined;
        }, 30_000);
        assert.equal(job.status, 'succeeded', JSON.stringify(job.error));
        const got = await Promise.all((job.output.urls as string[]).map(async (u) => {
          const r = await fetch(u);
          return [r.headers.get('content-type'), Buffer.from(await r.arrayBuffer())] as const;
        }));
        assert.deepEqual(got.map(([type]) => type), ['image/png', 'video/mp4']);
        assert.deepEqual(got[0][1], frame);
        assert.deepEqual(got[1][1], mp4);
        assert.deepEqual(server.created.map((c) => c.input.image), [dataUri('image/png', png)], 'the staged input file reached Cog');
      });
      assert.equal(code, 0, stderr);
      assert.match(stderr, /"mask" is not offered to jobs/);
    } finally {
      await server.stop();
    }
  });

  it('a container that dies mid-prediction: the worker takes no lease until its health-check says READY again, and the run waits with its attempts unspent', async () => {
    const server = await new CogServer(imageModelSchema()).start();
    const port = Number(new URL(server.url).port);
    let back: CogServer | undefined;
    const video = async () => (await gw.request('GET', '/v1/capabilities', { key })).body.kinds.find((k: { kind: string }) => k.kind === VIDEO) as { workers: number; workers_unavailable: number };
    try {
      server.scripts.push({ steps: [{ log: 'denoising\n' }, { wait: new Promise(() => {}) }] });
      const { code, stderr } = await runWorker(['--cog-url', server.url, '--kinds', VIDEO], async () => {
        await until('the worker serves the kind', async () => (await video()).workers === 1, 60_000);
        const res = await gw.submit(key, { kind: VIDEO, input: { prompt: 'a cat', image: dataUri('image/png', png) } });
        assert.equal(res.status, 202, res.text);
        const runId = res.body.run_id as string;
        await until('the prediction runs', async () => server.running() === 1, 30_000);
        await server.kill();
        await until('the worker says its backend is down', async () => (await video()).workers_unavailable === 1, 30_000);
        // The container comes back, still starting: its health-check is asked and says no.
        back = await new CogServer(imageModelSchema()).start(port);
        back.health = 'STARTING';
        back.scripts.push({ steps: [{ yield: dataUri('image/png', samplePng(4, 9)) }] });
        await until('two health checks while it starts', async () => back!.healthChecks >= 2, 60_000);
        const waiting = (await gw.request('GET', `/v1/jobs/${runId}`, { key })).body;
        assert.equal(waiting.status, 'queued', JSON.stringify(waiting));
        assert.equal(waiting.attempts, 1, 'no attempt spent while the backend is down');
        assert.equal((await video()).workers_unavailable, 1);
        back.health = 'READY';
        const job = await until('the job ends', async () => {
          const j = (await gw.request('GET', `/v1/jobs/${runId}`, { key })).body;
          return j.terminal ? j : undefined;
        }, 60_000);
        assert.equal(job.status, 'succeeded', JSON.stringify(job.error));
        assert.equal(job.attempts, 2);
        assert.equal((await video()).workers_unavailable, 0);
      });
      assert.equal(code, 0, stderr);
    } finally {
      await server.stop().catch(() => {});
      await back?.stop();
    }
  });

  it('refuses, exit 2, a command line without --cog-url or with more than one kind', async () => {
    const exitOf = async (args: string[]) => {
      const child = spawn(process.execPath, ['api/bin/switchyard.mjs', 'worker', '--gateway', gw.url, '--token', token, '--engine', 'cog', ...args], { env, stdio: ['ignore', 'ignore', 'pipe'] });
      let stderr = '';
      child.stderr.on('data', (d) => (stderr += d));
      return { code: await new Promise<number | null>((resolve) => child.on('exit', resolve)), stderr };
    };
    const [noUrl, twoKinds] = await Promise.all([exitOf(['--kinds', VIDEO]), exitOf(['--cog-url', 'http://127.0.0.1:5000', '--kinds', `${VIDEO},${LLM}`])]);
    assert.equal(noUrl.code, 2, noUrl.stderr);
    assert.match(noUrl.stderr, /--engine cog needs --cog-url/);
    assert.equal(twoKinds.code, 2, twoKinds.stderr);
    assert.match(twoKinds.stderr, /serves one kind/);
  });

  it('exits 1, saying why, when the container failed its setup', async () => {
    const server = await new CogServer(imageModelSchema()).start();
    server.health = 'SETUP_FAILED';
    server.setupLogs = 'Traceback...\nFileNotFoundError: weights.safetensors\n';
    try {
      const child = spawn(process.execPath, ['api/bin/switchyard.mjs', 'worker', '--gateway', gw.url, '--token', token, '--engine', 'cog', '--cog-url', server.url, '--kinds', VIDEO], { env, stdio: ['ignore', 'ignore', 'pipe'] });
      let stderr = '';
      child.stderr.on('data', (d) => (stderr += d));
      const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
      assert.equal(code, 1, stderr);
      assert.match(stderr, /SETUP_FAILED[\s\S]*weights\.safetensors/);
    } finally {
      await server.stop();
    }
  });
});
