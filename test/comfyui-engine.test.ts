import assert from 'node:assert/strict';
import { cpSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { BindError, TemplateError, bindWorkflow, createComfyUiEngine, loadTemplates, parseTemplate, templateFileName } from '../sdk/engines/comfyui/index.js';
import { PromptProgress } from '../sdk/engines/comfyui/prompt-progress.js';
import type { FailureReport } from '../sdk/protocol/index.js';
import { SwitchyardWorker } from '../sdk/worker/index.js';
import { silentLogger } from '../sdk/worker/logger.js';
import { FakeComfyUi } from './helpers/comfyui-server.js';
import { TestGateway, cleanupPrefix, uniquePrefix, until } from './helpers/harness.js';

/**
 * The ComfyUI engine (sdk/engines/comfyui) against a server following ComfyUI's HTTP and
 * WebSocket API (test/helpers/comfyui-server.ts): its templates and binding alone, and as the
 * handler of an SDK worker of a real gateway. The CLI's view is in comfyui-engine-cli.test.ts.
 */

const SHIPPED = path.resolve(import.meta.dirname, '../sdk/engines/comfyui/workflows');
const IMAGE = 'inference:image:generate';
const MESH = 'inference:3d:image-to-mesh';
const SFX = 'inference:audio:sfx-generate';

/** Stable Audio's text-to-audio graph (comfy_extras/nodes_audio.py), for a third file type. */
const SFX_GRAPH = {
  '4': { class_type: 'CheckpointLoaderSimple', inputs: { ckpt_name: 'stable-audio-open-1.0.safetensors' } },
  '6': { class_type: 'CLIPTextEncode', inputs: { text: '{{prompt}}', clip: ['4', 1] } },
  '7': { class_type: 'CLIPTextEncode', inputs: { text: '', clip: ['4', 1] } },
  '11': { class_type: 'EmptyLatentAudio', inputs: { seconds: '{{duration_s|5}}', batch_size: 1 } },
  '3': { class_type: 'KSampler', inputs: { seed: '{{seed}}', steps: 3, cfg: 6, sampler_name: 'dpmpp_3m_sde_gpu', scheduler: 'exponential', denoise: 1, model: ['4', 0], positive: ['6', 0], negative: ['7', 0], latent_image: ['11', 0] } },
  '12': { class_type: 'VAEDecodeAudio', inputs: { samples: ['3', 0], vae: ['4', 2] } },
  '13': { class_type: 'SaveAudio', inputs: { audio: ['12', 0], filename_prefix: 'audio/switchyard' } },
};

/** The shipped templates plus test ones: audio, and a model whose checkpoint the server lacks. */
function workflowsDir(): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'sy-comfy-'));
  cpSync(SHIPPED, dir, { recursive: true });
  writeFileSync(path.join(dir, templateFileName(SFX)), JSON.stringify(SFX_GRAPH));
  const missing = JSON.parse(JSON.stringify(loadTemplates(SHIPPED).find((t) => t.kind === IMAGE && !t.model)!.graph));
  missing['4'].inputs.ckpt_name = 'not-downloaded.safetensors';
  writeFileSync(path.join(dir, templateFileName(IMAGE, 'not-downloaded')), JSON.stringify(missing));
  writeFileSync(path.join(dir, 'README.txt'), 'not a template');
  return dir;
}

describe('ComfyUI engine', function () {
  this.timeout(60_000);

  describe('templates, binding, progress', () => {
    it('reads a folder by file name: kind, optional @model; the shipped templates parse', () => {
      const templates = loadTemplates(SHIPPED);
      assert.deepEqual(templates.map((t) => [t.kind, t.model, t.fields.sort(), t.fileFields]), [
        [MESH, null, ['seed'], ['image']],
        [IMAGE, null, ['height', 'negative_prompt', 'prompt', 'seed', 'width'], []],
        [IMAGE, 'sdxl-base-1.0', ['height', 'negative_prompt', 'prompt', 'seed', 'width'], []],
      ]);
      assert.equal(templateFileName('inference:rig'), 'rig.json');
      assert.equal(templateFileName(IMAGE, 'sd1.5'), 'image.generate@sd1.5.json');
      const engine = createComfyUiEngine({ url: 'http://127.0.0.1:1', workflows: SHIPPED });
      assert.deepEqual(engine.kinds, [MESH, IMAGE]);
      assert.deepEqual(engine.models, { [MESH]: [], [IMAGE]: [{ id: 'sdxl-base-1.0' }] });
    });

    it('refuses what ComfyUI could not run, naming the file', () => {
      const bad = (text: string, message: RegExp) => assert.throws(() => parseTemplate(text, 'x.json', IMAGE, null), (e: Error) => e instanceof TemplateError && message.test(e.message));
      bad('{', /x\.json is not JSON/);
      bad('[]', /not a ComfyUI API-format graph/);
      bad('{"nodes": [], "links": [], "version": 0.4}', /UI workflow; export it with "Export \(API\)"/);
      bad('{"3": {"inputs": {}}}', /node "3" is not \{"class_type"/);
      const empty = mkdtempSync(path.join(os.tmpdir(), 'sy-comfy-empty-'));
      try {
        assert.throws(() => loadTemplates(empty), /has no workflow template: name them <kind>\.json, e\.g\. image\.generate\.json/);
      } finally {
        rmSync(empty, { recursive: true });
      }
    });

    it('binds typed values, text, defaults, a random seed and uploaded file names; refuses what cannot fill', () => {
      const graph = { '1': { class_type: 'N', inputs: { seed: '{{seed}}', w: '{{width|512}}', text: 'a {{prompt}}, 4k', neg: '{{negative_prompt|}}', img: '{{file:image}}', link: ['2', 0], n: 3 } } };
      const bound = bindWorkflow(graph, { seed: 7, width: 640, prompt: 'cat' }, { image: 'switchyard-ab.png' }, '/d/t.json');
      assert.deepEqual(bound['1'].inputs, { seed: 7, w: 640, text: 'a cat, 4k', neg: '', img: 'switchyard-ab.png', link: ['2', 0], n: 3 });
      assert.equal(graph['1'].inputs.seed, '{{seed}}', 'the template itself is left as it was');
      const defaults = bindWorkflow(graph, { prompt: 'dog' }, { image: 'x.png' }, '/d/t.json')['1'].inputs;
      assert.equal(defaults.w, 512);
      assert.ok(Number.isInteger(defaults.seed) && (defaults.seed as number) >= 0 && (defaults.seed as number) < 2 ** 32, `random seed ${defaults.seed}`);
      const refused = (input: Record<string, unknown>, message: RegExp) =>
        assert.throws(() => bindWorkflow(graph, input, { image: 'x.png' }, '/d/t.json'), (e: BindError) => e instanceof BindError && e.code === 'bad_input' && !e.retryable && message.test(e.message));
      refused({}, /input field prompt is required by the template t\.json \(\{\{prompt\}\}\)/);
      refused({ prompt: ['2', 0] }, /must be a string, number or boolean/);
      assert.throws(() => bindWorkflow(graph, { prompt: 'x' }, {}, '/d/t.json'), /needs the file of input field image/);
    });

    it('combines progress over the nodes that run: a sampler’s steps within its share, never back, below 1', () => {
      const seen: number[] = [];
      const p = new PromptProgress(['1', '2', '3', '4'], (v) => seen.push(v));
      const msg = (type: string, data: Record<string, unknown>) => p.onMessage({ type, data: { prompt_id: 'p', ...data } });
      msg('execution_cached', { nodes: ['1'] });
      msg('executing', { node: '2' });
      msg('executing', { node: '3' });
      for (let i = 1; i <= 4; i++) msg('progress', { value: i, max: 4, node: '3' });
      msg('executing', { node: '4' });
      msg('progress', { value: 1, max: 2, node: '4' });
      assert.deepEqual(seen.map((v) => Math.round(v * 1000) / 1000), [0.333, 0.417, 0.5, 0.583, 0.667, 0.833]);
    });
  });

  describe('as the handler of a worker of a real gateway', () => {
    const prefix = uniquePrefix('comfyui-engine');
    let gw: TestGateway, comfy: FakeComfyUi, worker: SwitchyardWorker, key: string, token: string, dir: string;
    const failures: FailureReport[] = [];
    const submit = async (kind: string, input: Record<string, unknown>) => {
      const res = await gw.submit(key, { kind, input });
      assert.equal(res.status, 202, res.text);
      return res.body.run_id as string;
    };
    const finished = (runId: string) =>
      until(`${runId} ends`, async () => {
        const run = await gw.stores.runs.get(runId);
        return run && ['succeeded', 'failed', 'canceled'].includes(run.status) ? run : null;
      });
    const startWorker = async (url: string, probe?: () => Promise<void>) => {
      const engine = createComfyUiEngine({ url, workflows: dir });
      const backend = probe ? { backend: { probe, firstDelayMs: 50, maxDelayMs: 200 } } : {};
      const w = new SwitchyardWorker({ gateway: gw.url, token, kinds: engine.kinds, handler: engine.handler, models: engine.models, slots: 2, logger: silentLogger, ...backend });
      w.on('failed', (_lease, error) => failures.push(error));
      await w.start();
      return { w, engine };
    };

    before(async () => {
      dir = workflowsDir();
      comfy = await new FakeComfyUi().start();
      gw = await new TestGateway(prefix, { JOB_MAX_ATTEMPTS: '2' }).start();
      ({ key } = await gw.account(10_000));
      token = await gw.workerToken();
      ({ w: worker } = await startWorker(comfy.url));
    });
    after(async () => {
      await worker?.stop({ timeoutMs: 0 });
      await gw?.stop();
      await comfy?.stop();
      await cleanupPrefix(prefix);
      rmSync(dir, { recursive: true, force: true });
    });

    it('returns every file the prompt wrote, typed by its extension (a WAV ComfyUI serves as audio/x-wav)', async () => {
      const run = await finished(await submit(SFX, { prompt: 'rain on a tin roof', seed: 3, duration_s: 2 }));
      assert.equal(run.status, 'succeeded', JSON.stringify(run.error));
      assert.equal(run.output!.urls.length, 1);
      const res = await fetch(run.output!.urls[0]);
      assert.equal(res.headers.get('content-type'), 'audio/wav');
      assert.equal(Buffer.from(await res.arrayBuffer()).toString('latin1', 0, 4), 'RIFF');
      assert.match(run.output!.urls[0], /switchyard_00001_\.wav$/);
      const sent = comfy.prompts.at(-1)!;
      assert.equal(sent.prompt['11'].inputs.seconds, 2);
      assert.equal(sent.client_id?.length, 32, 'queued with the client id of the worker\'s socket');
    });

    it('follows a prompt that is over before POST /prompt answers (its messages kept until it is watched)', async () => {
      comfy.answerLate = true;
      try {
        const run = await finished(await submit(IMAGE, { prompt: 'quick' }));
        assert.equal(run.status, 'succeeded', JSON.stringify(run.error));
        assert.equal(run.output!.urls.length, 1);
      } finally {
        comfy.answerLate = false;
      }
    });

    it('fails at once, not retryable, with ComfyUI’s node_errors when it refuses the prompt', async () => {
      failures.length = 0;
      const before = comfy.prompts.length;
      const run = await finished(await submit(IMAGE, { prompt: 'a cat', model: 'not-downloaded' }));
      assert.equal(run.status, 'failed');
      assert.equal(run.attempts, 1);
      assert.equal(comfy.prompts.length - before, 1);
      assert.equal(run.error!.code, 'upstream_error');
      assert.match(run.error!.message, /answered POST \/prompt with 400: Prompt outputs failed validation; node 4 \(CheckpointLoaderSimple\): Value not in list: ckpt_name: 'not-downloaded\.safetensors' not in/);
      await until('the worker hears the answer', async () => failures.length === 1);
      assert.equal(failures[0].retryable, false);
    });

    it('fails retryable with ComfyUI’s exception on execution_error: tried again, then failed', async () => {
      failures.length = 0;
      comfy.failWith = { class_type: 'KSampler', exception_type: 'torch.OutOfMemoryError', exception_message: 'CUDA out of memory. Tried to allocate 2.00 GiB' };
      try {
        const run = await finished(await submit(IMAGE, { prompt: 'a cat' }));
        assert.equal(run.status, 'failed');
        assert.equal(run.attempts, 2);
        assert.equal(run.error!.code, 'upstream_failed');
        assert.match(run.error!.message, /node 3 \(KSampler\) raised torch\.OutOfMemoryError: CUDA out of memory\. Tried to allocate 2\.00 GiB/);
        await until('the worker hears both answers', async () => failures.length === 2);
        assert.deepEqual(failures.map((f) => f.retryable), [true, true]);
      } finally {
        comfy.failWith = null;
      }
    });

    it('cancels a running prompt with /interrupt and the queue delete; a queued one with the delete alone', async () => {
      const hold = comfy.holdAt('KSampler', 2);
      const running = await submit(IMAGE, { prompt: 'held' });
      const runningId = await hold.reached;
      const queued = await submit(IMAGE, { prompt: 'waits' });
      await until('the second prompt is queued', async () => comfy.prompts.some((p) => p.prompt['6'].inputs.text === 'waits'));
      assert.equal(comfy.connections, 1, 'the leases share the worker\'s one WebSocket');
      assert.equal(new Set(comfy.prompts.map((p) => p.client_id)).size, 1);
      const calls = comfy.calls.length;
      assert.equal((await gw.request('POST', `/v1/jobs/${queued}/cancel`, { key })).status, 200);
      assert.equal((await finished(queued)).status, 'canceled');
      await until('the queue delete arrives', async () => comfy.calls.slice(calls).some((c) => c.path === '/queue'));
      assert.deepEqual(comfy.calls.slice(calls).map((c) => c.path), ['/queue'], 'no interrupt for a prompt that is not running');
      const queuedId = comfy.calls.at(-1)!.body.delete[0];
      assert.notEqual(queuedId, runningId);
      assert.ok(!comfy.history.has(queuedId), 'the queued prompt never ran');

      assert.equal((await gw.request('POST', `/v1/jobs/${running}/cancel`, { key })).status, 200);
      await until('the interrupt and the delete arrive', async () => comfy.calls.slice(calls + 1).some((c) => c.path === '/queue'));
      assert.deepEqual(comfy.calls.slice(calls + 1), [
        { method: 'POST', path: '/interrupt', body: { prompt_id: runningId } },
        { method: 'POST', path: '/queue', body: { delete: [runningId] } },
      ]);
      assert.equal((await finished(running)).status, 'canceled');
      await until('ComfyUI stops the prompt', async () => comfy.history.has(runningId));
      assert.equal((comfy.history.get(runningId) as any).status.status_str, 'error');
    });

    it('a server that goes away mid-prompt: the lease fails retryable, the worker takes no lease until the server answers again, and the run waits with its attempts unspent', async () => {
      const doomed = await new FakeComfyUi().start();
      const port = Number(new URL(doomed.url).port);
      let probes = 0;
      let engineProbe!: () => Promise<void>;
      const { w, engine } = await startWorker(doomed.url, async () => {
        probes++;
        await engineProbe();
      });
      engineProbe = engine.probe;
      const states: Array<{ available: boolean; message?: string }> = [];
      w.on('backend', (state) => states.push(state));
      await worker.stop({ timeoutMs: 0 });
      const image = async () => ((await gw.request('GET', '/v1/capabilities', { key })).body.kinds as Array<{ kind: string; workers: number; workers_unavailable: number }>).find((k) => k.kind === IMAGE)!;
      let back: FakeComfyUi | undefined;
      try {
        failures.length = 0;
        const hold = doomed.holdAt('KSampler', 1);
        const runId = await submit(IMAGE, { prompt: 'a cat' });
        await hold.reached;
        await doomed.stop();
        await until('the worker reports the failure', async () => failures.length >= 1);
        assert.equal(failures[0].code, 'upstream_unavailable');
        assert.equal(failures[0].retryable, true);
        assert.match(failures[0].message, /WebSocket to ComfyUI at http:\/\/127\.0\.0\.1:\d+ closed .* the server went away/);
        assert.equal(states[0]?.available, false);
        // The gateway counts the worker, as connected but not free, and leases it nothing.
        await until('capabilities to show the worker unavailable', async () => (await image()).workers_unavailable === 1);
        assert.equal((await image()).workers, 1);
        const capacity = (await gw.request('GET', '/v1/network/capacity')).body;
        assert.equal(capacity.workers.unavailable, 1);
        assert.equal(capacity.by_kind.find((k: { kind: string }) => k.kind === IMAGE).slots_free, 0);
        // While probes find nothing listening, the run waits: its second (and last) attempt is not spent.
        await until('three probes of the dead server', async () => probes >= 3);
        const waiting = (await gw.request('GET', `/v1/jobs/${runId}`, { key })).body;
        assert.equal(waiting.status, 'queued');
        assert.equal(waiting.attempts, 1);
        assert.ok(['backend_unavailable', 'retry_backoff'].includes(waiting.waiting_reason), waiting.waiting_reason);
        assert.equal(failures.length, 1);

        // The server answers again on its address: the next probe puts the worker back to work.
        back = await new FakeComfyUi().start(port);
        const run = await finished(runId);
        assert.equal(run.status, 'succeeded');
        assert.equal(run.attempts, 2);
        assert.deepEqual(states.map((st) => st.available), [false, true]);
        assert.equal((await image()).workers_unavailable, 0);
      } finally {
        await w.stop({ timeoutMs: 0 });
        await engine.close();
        await back?.stop();
      }
    });
  });
});
