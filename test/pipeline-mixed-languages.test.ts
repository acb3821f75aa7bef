import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { createDemoEngine } from '../sdk/engines/demo/index.js';
import { imageWhole } from '../sdk/engines/demo/ranked-image.js';
import { generateWhole } from '../sdk/engines/demo/ranked-llm.js';
import { SwitchyardWorker, silentLogger } from '../sdk/worker/index.js';
import { ADMIN_TOKEN, TestGateway, cleanupPrefix, uniquePrefix, until } from './helpers/harness.js';
import { PYTHON, requireProgram } from './helpers/optional-program.js';

const LLM = 'inference:llm:text-generate';
const IMAGE = 'inference:image:generate';
const admin = { authorization: `Bearer ${ADMIN_TOKEN}` };

/**
 * One pipeline of TypeScript and Python ranks through the real gateway (docs/ranks.md, "The demo
 * ranked models"): the TypeScript SDK running the demo engine on some ranks, the Python SDK's
 * `switchyard_worker.ranked_demo` as its own process on the others, and the run's output is the
 * model's run whole, byte for byte.
 */
describe('pipelines mixing TypeScript and Python ranks give the output of the model run whole', function () {
  this.timeout(90_000);
  const prefix = uniquePrefix('pipeline-mixed');
  let gw: TestGateway;
  let key: string;
  let token: string;
  const sdkWorkers: SwitchyardWorker[] = [];
  const processes: ChildProcess[] = [];
  let pythonLog = '';

  const tsRank = async (kind: string, model: string, index: number, count: number) => {
    const w = new SwitchyardWorker({ gateway: gw.url, token, kinds: [kind], handler: createDemoEngine({ delayMs: 0 }), models: { [kind]: [{ id: model, rank: { index, count } }] }, logger: silentLogger });
    sdkWorkers.push(w);
    await w.start();
  };
  const pythonRank = (python: string, rank: string, model: string) => {
    const child = spawn(python, ['-m', 'switchyard_worker.ranked_demo', '--gateway', gw.url, '--token', token, '--rank', rank, '--model', model], {
      env: { ...process.env, PYTHONPATH: 'sdk/python/worker', PYTHONDONTWRITEBYTECODE: '1' },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    // Its log, for a failure's message: a Python rank that never registers says why there.
    child.stderr!.on('data', (d) => (pythonLog += d));
    processes.push(child);
  };
  /** Waits until the fleet could form a pipeline of the model (every rank's worker registered). */
  const formed = (kind: string, model: string) =>
    until(`every rank of ${model} registered`, async () => {
      const caps = await gw.request('GET', '/v1/capabilities', { key });
      return caps.body.kinds.find((k: any) => k.kind === kind)?.models.find((m: any) => m.id === model)?.pipelines?.open >= 1;
    }, 30_000).catch((err: Error) => {
      throw new Error(`${err.message}\nthe Python rank's log:\n${pythonLog}`);
    });
  const run = async (body: unknown) => {
    const res = await gw.submit(key, body);
    assert.equal(res.status, 202, res.text);
    return until('the run finished', async () => {
      const r = (await gw.request('GET', `/v1/jobs/${res.body.run_id}`, { key })).body;
      return r.terminal ? r : null;
    }, 30_000);
  };

  before(async () => {
    gw = await new TestGateway(prefix).start();
    ({ key } = await gw.account(1000));
    token = await gw.workerToken('open');
  });
  after(async () => {
    for (const p of processes) p.kill('SIGTERM');
    await Promise.all(sdkWorkers.map((w) => w.stop({ timeoutMs: 0 })));
    await gw?.stop();
    await cleanupPrefix(prefix);
  });

  it('demo-ranked-llm: TypeScript rank 0, Python rank 1, TypeScript rank 2', async function () {
    const python = requireProgram(this, PYTHON);
    const res = await gw.request('PUT', `/v1/admin/models/${LLM}/demo-ranked-llm`, { headers: admin, body: { ranks: 3 } });
    assert.ok(res.status < 300, res.text);
    await tsRank(LLM, 'demo-ranked-llm', 0, 3);
    pythonRank(python, '1/3', 'demo-ranked-llm');
    await tsRank(LLM, 'demo-ranked-llm', 2, 3);
    await formed(LLM, 'demo-ranked-llm');
    for (const [prompt, maxTokens] of [['hello world', 12], ['in cat', 64]] as const) {
      const job = await run({ kind: LLM, input: { prompt, model: 'demo-ranked-llm', max_tokens: maxTokens } });
      assert.equal(job.status, 'succeeded', JSON.stringify(job.error));
      const whole = generateWhole(prompt, maxTokens);
      assert.equal(job.output.text, whole.text);
      assert.equal(job.output.finish_reason, whole.finish);
    }
  });

  it('demo-ranked-image: TypeScript rank 0, Python rank 1 writes the PNG', async function () {
    const python = requireProgram(this, PYTHON);
    const res = await gw.request('PUT', `/v1/admin/models/${IMAGE}/demo-ranked-image`, { headers: admin, body: { ranks: 2 } });
    assert.ok(res.status < 300, res.text);
    await tsRank(IMAGE, 'demo-ranked-image', 0, 2);
    pythonRank(python, '1/2', 'demo-ranked-image');
    await formed(IMAGE, 'demo-ranked-image');
    const prompt = 'a red fox in the snow';
    const job = await run({ kind: IMAGE, input: { prompt, model: 'demo-ranked-image' } });
    assert.equal(job.status, 'succeeded', JSON.stringify(job.error));
    const png = Buffer.from(await (await fetch(job.output.urls[0])).arrayBuffer());
    assert.ok(png.equals(imageWhole(prompt)), 'the PNG of the model run whole');
  });
});
