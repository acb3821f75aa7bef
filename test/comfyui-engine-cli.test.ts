import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { FakeComfyUi } from './helpers/comfyui-server.js';
import { REDIS_URL, TestGateway, cleanupPrefix, uniquePrefix, until } from './helpers/harness.js';
import { dataUri, samplePng } from './helpers/sample-files.js';
import { SseClient } from './helpers/sse-client.js';
import { runCliWorker } from './helpers/cli-worker.js';

/**
 * `switchyard worker --engine comfyui`: the command a contributor with a ComfyUI server runs,
 * with the templates the engine ships. Real processes of the real bin, a real gateway, a server
 * following ComfyUI's API (test/helpers/comfyui-server.ts).
 */

const SHIPPED = path.resolve(import.meta.dirname, '../sdk/engines/comfyui/workflows');
const IMAGE = 'inference:image:generate';
const MESH = 'inference:3d:image-to-mesh';

describe('switchyard worker --engine comfyui', function () {
  // CLI processes load the TypeScript sources: seconds each on a loaded machine.
  this.timeout(120_000);
  const prefix = uniquePrefix('comfyui-engine-cli');
  const env = { ...process.env, REDIS_URL, LOG_LEVEL: 'warn', SWITCHYARD_WORKER_TOKEN: '' };
  let gw: TestGateway, comfy: FakeComfyUi, key: string, token: string;

  const runWorker = (args: string[], whileUp: () => Promise<void>) => runCliWorker({ gateway: gw.url, token, env }, args, whileUp);

  before(async () => {
    comfy = await new FakeComfyUi().start();
    gw = await new TestGateway(prefix).start();
    ({ key } = await gw.account(10_000));
    token = await gw.workerToken();
  });
  after(async () => {
    await gw?.stop();
    await comfy?.stop();
    await cleanupPrefix(prefix);
  });

  it('serves the shipped templates: placeholders bound, progress streamed, files uploaded, models routed', async () => {
    const { code, stderr } = await runWorker(['--engine', 'comfyui', '--comfyui-url', comfy.url, '--workflows', SHIPPED], async () => {
      const caps = async () => (await gw.request('GET', '/v1/capabilities', { key })).body.kinds as Array<{ kind: string; workers: number; models: Array<{ id: string }> }>;
      await until('the worker is registered', async () => (await caps()).some((k) => k.kind === MESH && k.workers > 0), 60_000);
      assert.deepEqual((await caps()).find((k) => k.kind === IMAGE)!.models.map((m) => m.id), ['sdxl-base-1.0']);

      // An image job, held mid-sampling until its caller has seen progress.
      const hold = comfy.holdAt('KSampler', 10);
      const res = await gw.submit(key, { kind: IMAGE, input: { prompt: 'a lighthouse at dusk', negative_prompt: 'blurry', seed: 1234, width: 640, height: 384 } });
      assert.equal(res.status, 202, res.text);
      const runId = res.body.run_id;
      const events = await new SseClient(`${gw.url}/v1/jobs/${runId}/events`, key).open();
      await hold.reached;
      await events.until(() => events.frames.some((f) => f.event === 'progress' && f.data.progress > 0.5));
      hold.release();
      await events.until(() => events.frames.some((f) => f.event === 'done'));
      events.close();
      const progress = events.frames.filter((f) => f.event === 'progress').map((f) => f.data.progress as number);
      assert.deepEqual(progress, [...progress].sort((a, b) => a - b), 'progress never goes back');
      const run = (await gw.stores.runs.get(runId))!;
      assert.equal(run.status, 'succeeded', JSON.stringify(run.error));
      assert.equal(run.output!.width, 640);
      assert.equal(run.output!.height, 384);
      const image = await fetch(run.output!.urls[0]);
      assert.equal(image.headers.get('content-type'), 'image/png');
      const sent = comfy.prompts.at(-1)!.prompt;
      assert.equal(sent['4'].inputs.ckpt_name, 'v1-5-pruned-emaonly-fp16.safetensors', 'no model: the default template');
      assert.deepEqual([sent['6'].inputs.text, sent['7'].inputs.text, sent['3'].inputs.seed, sent['5'].inputs.width, sent['5'].inputs.height], ['a lighthouse at dusk', 'blurry', 1234, 640, 384]);

      // A job naming the SDXL model runs its template, with that template's defaults.
      const sdxl = await gw.submit(key, { kind: IMAGE, input: { prompt: 'a fox', model: 'sdxl-base-1.0' } });
      await until('the sdxl job ends', async () => ['succeeded', 'failed'].includes((await gw.stores.runs.get(sdxl.body.run_id))?.status ?? ''));
      const sdxlSent = comfy.prompts.at(-1)!.prompt;
      assert.deepEqual([sdxlSent['4'].inputs.ckpt_name, sdxlSent['5'].inputs.width, sdxlSent['7'].inputs.text], ['sd_xl_base_1.0.safetensors', 1024, 'text, watermark']);

      // An image-to-mesh job: its image uploaded to ComfyUI, LoadImage given the name it got.
      const png = samplePng(16, 3);
      const mesh = await gw.submit(key, { kind: MESH, input: { image: dataUri('image/png', png), seed: 5 } });
      assert.equal(mesh.status, 202, mesh.text);
      const meshRun = await until('the mesh job ends', async () => {
        const r = await gw.stores.runs.get(mesh.body.run_id);
        return r && ['succeeded', 'failed'].includes(r.status) ? r : null;
      });
      assert.equal(meshRun.status, 'succeeded', JSON.stringify(meshRun.error));
      const upload = comfy.callsTo('/upload/image').at(-1)!;
      assert.equal(upload.body.type, 'input');
      assert.equal(upload.body.size, png.length);
      const loadImage = comfy.prompts.at(-1)!.prompt['2'].inputs.image;
      assert.match(loadImage, /^switchyard-[0-9a-f]{32}\.png$/);
      assert.ok(comfy.inputs.get(loadImage)!.equals(png), 'LoadImage reads the uploaded bytes');
      const glb = await fetch(meshRun.output!.urls[0]);
      assert.equal(glb.headers.get('content-type'), 'model/gltf-binary');
      assert.equal(Buffer.from(await glb.arrayBuffer()).toString('latin1', 0, 4), 'glTF');
    });
    assert.equal(code, 0, stderr);
    assert.match(stderr, /serving inference:3d:image-to-mesh; inference:image:generate \(models: sdxl-base-1\.0\) with ComfyUI 0\.3\.99-fake/);
  });

  it('exits 1 when ComfyUI does not answer or a template is unusable; bad flags exit 2', async () => {
    const broken = mkdtempSync(path.join(os.tmpdir(), 'sy-comfy-broken-'));
    writeFileSync(path.join(broken, 'image.generate.json'), '{"nodes": [], "links": []}');
    const custom = mkdtempSync(path.join(os.tmpdir(), 'sy-comfy-custom-'));
    writeFileSync(path.join(custom, 'rig.json'), JSON.stringify({ '1': { class_type: 'UniRigAutoRig', inputs: { mesh: '{{file:mesh}}' } }, '2': { class_type: 'SaveGLB', inputs: { mesh: ['1', 0], filename_prefix: 'rig' } } }));
    const dead = await new FakeComfyUi().start();
    await dead.stop();
    const cli = (args: string[]) =>
      new Promise<{ code: number | null; stderr: string }>((resolve) => {
        const child = spawn(process.execPath, ['api/bin/switchyard.mjs', 'worker', '--gateway', gw.url, '--token', token, ...args], { env, stdio: ['ignore', 'ignore', 'pipe'] });
        let stderr = '';
        child.stderr.on('data', (d) => (stderr += d));
        child.on('exit', (code) => resolve({ code, stderr }));
      });
    const cases: Array<[string[], number, RegExp]> = [
      [['--engine', 'comfyui', '--comfyui-url', dead.url, '--workflows', SHIPPED], 1, /ComfyUI at http:\/\/127\.0\.0\.1:\d+ does not answer: .*ECONNREFUSED/],
      [['--engine', 'comfyui', '--comfyui-url', comfy.url, '--workflows', broken], 1, /image\.generate\.json is a ComfyUI UI workflow; export it with "Export \(API\)"/],
      [['--engine', 'comfyui', '--comfyui-url', comfy.url, '--workflows', custom], 1, /lacks node types the templates use \(.*rig\.json uses UniRigAutoRig\): install those custom nodes/],
      [['--engine', 'comfyui', '--comfyui-url', comfy.url, '--workflows', SHIPPED, '--kinds', 'inference:rig'], 1, /no workflow template in .* for inference:rig: add rig\.json/],
      [['--engine', 'comfyui', '--workflows', SHIPPED], 2, /--engine comfyui needs --comfyui-url/],
      [['--engine', 'comfyui', '--comfyui-url', comfy.url, '--workflows', SHIPPED, '--models', 'x'], 2, /--models is not for --engine comfyui/],
      [['--kinds', IMAGE, '--workflows', SHIPPED], 2, /--workflows is for --engine comfyui/],
    ];
    try {
      for (let i = 0; i < cases.length; i += 2) {
        const batch = cases.slice(i, i + 2);
        const results = await Promise.all(batch.map(([args]) => cli(args)));
        batch.forEach(([args, code, message], j) => {
          assert.equal(results[j].code, code, `${args.join(' ')}: ${results[j].stderr}`);
          assert.match(results[j].stderr, message, args.join(' '));
        });
      }
    } finally {
      rmSync(broken, { recursive: true });
    }
  });
});
