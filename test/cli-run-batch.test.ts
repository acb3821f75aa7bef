import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { createDemoEngine } from '../sdk/engines/demo/index.js';
import { SwitchyardWorker, silentLogger } from '../sdk/worker/index.js';
import { TestGateway, cleanupPrefix, uniquePrefix } from './helpers/harness.js';

const exec = promisify(execFile);
const BIN = path.resolve('api/bin/switchyard.mjs');
const KIND = 'inference:image:generate';

describe('switchyard run --batch', function () {
  this.timeout(60_000);
  const prefix = uniquePrefix('clibatch');
  let gw: TestGateway;
  let worker: SwitchyardWorker;
  let key: string;
  let dir: string;

  async function cli(args: string[]) {
    try {
      const { stdout, stderr } = await exec(process.execPath, [BIN, 'run', ...args], { env: { ...process.env, SWITCHYARD_URL: gw.url, SWITCHYARD_API_KEY: key }, cwd: dir });
      return { code: 0, stdout, stderr };
    } catch (err) {
      const e = err as { code: number; stdout: string; stderr: string };
      return { code: e.code, stdout: e.stdout, stderr: e.stderr };
    }
  }
  const jsonl = (name: string, jobs: unknown[]) => {
    writeFileSync(path.join(dir, name), jobs.map((j) => JSON.stringify(j)).join('\n') + '\n\n');
    return name;
  };

  before(async () => {
    gw = await new TestGateway(prefix).start();
    ({ key } = await gw.account(10_000));
    worker = new SwitchyardWorker({ gateway: gw.url, token: await gw.accountWorkerToken(key), kinds: [KIND], slots: 4, handler: createDemoEngine({ delayMs: 0 }), logger: silentLogger });
    await worker.start();
    dir = mkdtempSync(path.join(os.tmpdir(), 'switchyard-cli-batch-'));
  });
  after(async () => {
    await worker?.stop({ timeoutMs: 0 });
    await gw?.stop();
    await cleanupPrefix(prefix);
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('submits the file as one batch, prints its id and each job as it ends, exit 0 when all succeed', async () => {
    const file = jsonl('ok.jsonl', [0, 1, 2].map((i) => ({ kind: KIND, input: { prompt: `lamp ${i}`, width: 64, height: 64 } })));
    const res = await cli(['--batch', file]);
    assert.equal(res.code, 0, res.stderr);
    const [batchLine, ...jobLines] = res.stdout.trim().split('\n');
    assert.match(batchLine, /^batch_[0-9A-Z]{26}$/);
    assert.equal(jobLines.length, 3);
    for (const line of jobLines) assert.match(line, new RegExp(`^run_[0-9A-Z]{26} succeeded ${gw.url}/v1/artifacts/\\S+$`));
    assert.match(res.stderr, /3 succeeded/);
    const listed = await gw.request('GET', `/v1/jobs?batch_id=${batchLine}`, { key });
    assert.deepEqual(new Set(listed.body.data.map((j: { run_id: string }) => j.run_id)), new Set(jobLines.map((l) => l.split(' ')[0])));
  });

  it('reports a refused batch with the failing line index, creating nothing (exit 1), and a bad file as a usage error (exit 2)', async () => {
    const refused = await cli(['--batch', jsonl('bad.jsonl', [{ kind: KIND, input: { prompt: 'ok' } }, { kind: KIND, input: {} }])]);
    assert.equal(refused.code, 1);
    assert.match(refused.stderr, /400 invalid_request/);
    assert.match(refused.stderr, /"index":1/);
    assert.equal(refused.stdout, '');
    writeFileSync(path.join(dir, 'broken.jsonl'), `${JSON.stringify({ kind: KIND, input: { prompt: 'a' } })}\n{not json\n`);
    const broken = await cli(['--batch', 'broken.jsonl']);
    assert.equal(broken.code, 2);
    assert.match(broken.stderr, /line 2 is not JSON/);
  });
});
