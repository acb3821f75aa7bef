import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { progressLine } from '../api/main/commands/run.js';
import { createDemoEngine } from '../sdk/engines/demo/index.js';
import { readGlb, readMeshGeometry } from '../sdk/engines/demo/glb-read.js';
import { encodePng } from '../sdk/engines/demo/png.js';
import { SwitchyardWorker, silentLogger } from '../sdk/worker/index.js';
import { TestGateway, cleanupPrefix, uniquePrefix, until } from './helpers/harness.js';

const exec = promisify(execFile);
const BIN = path.resolve('api/bin/switchyard.mjs');
const KIND = 'inference:image:generate';
/** A kind with a file field (`image`), served by the test worker too. */
const MESH_KIND = 'inference:3d:image-to-mesh';
const RIG_KIND = 'inference:rig';
const TEXTURE_KIND = 'inference:texture:generate';
/** Not served by the test worker: its runs stay queued. */
const UNSERVED = 'inference:audio:sfx-generate';

describe('switchyard run', () => {
  const prefix = uniquePrefix('clirun');
  let gw: TestGateway;
  let worker: SwitchyardWorker;
  let key: string;
  let env: Record<string, string>;
  /** The working directory of the commands, where photo.png is. */
  let dir: string;

  async function cli(args: string[], extraEnv: Record<string, string> = {}) {
    try {
      const { stdout, stderr } = await exec(process.execPath, [BIN, 'run', ...args], { env: { ...process.env, ...env, ...extraEnv }, cwd: dir });
      return { code: 0, stdout, stderr };
    } catch (err) {
      const e = err as { code: number; stdout: string; stderr: string };
      return { code: e.code, stdout: e.stdout, stderr: e.stderr };
    }
  }

  before(async () => {
    gw = await new TestGateway(prefix).start();
    ({ key } = await gw.account(10_000));
    const tokenToken = await gw.accountWorkerToken(key);
    worker = new SwitchyardWorker({ gateway: gw.url, token: tokenToken, kinds: [KIND, MESH_KIND, RIG_KIND, TEXTURE_KIND], slots: 4, handler: createDemoEngine({ delayMs: 200 }), logger: silentLogger });
    await worker.start();
    env = { SWITCHYARD_URL: gw.url, SWITCHYARD_API_KEY: key };
    dir = mkdtempSync(path.join(os.tmpdir(), 'switchyard-cli-run-'));
    writeFileSync(path.join(dir, 'photo.png'), encodePng(16, 16, 3, new Uint8Array(16 * 16 * 3).map((_, i) => (i * 7) & 0xff)));
  });
  after(async () => {
    await worker?.stop({ timeoutMs: 0 });
    await gw?.stop();
    await cleanupPrefix(prefix);
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('--wait --json prints only the final job JSON, whose artifact URLs serve the files', async () => {
    const res = await cli([KIND, '--input', '{"prompt":"a lighthouse"}', '--wait', '--json']);
    assert.equal(res.code, 0, res.stderr);
    const job = JSON.parse(res.stdout);
    assert.equal(job.status, 'succeeded');
    assert.equal(job.terminal, true);
    assert.match(res.stderr, new RegExp(job.run_id));
    assert.ok(job.output.urls.length > 0);
    for (const url of job.output.urls) assert.equal((await fetch(url)).status, 200, url);
    const server = await gw.request('GET', `/v1/jobs/${job.run_id}`, { key });
    assert.deepEqual(job, server.body);
  });

  it('--input image=@photo.png uploads the file, runs with its id and --wait --json gives the mesh', async () => {
    const res = await cli([MESH_KIND, '--input', 'image=@photo.png', '--input', '{"seed":3}', '--wait', '--json']);
    assert.equal(res.code, 0, res.stderr);
    const job = JSON.parse(res.stdout);
    assert.equal(job.status, 'succeeded');
    const glb = (job.output.urls as string[]).find((u) => new URL(u).pathname.endsWith('.glb'));
    assert.ok(glb, `a .glb among ${job.output.urls}`);
    assert.equal((await fetch(glb)).status, 200);
    const stored = (await gw.stores.runs.get(job.run_id))!;
    assert.match(String(stored.input.image), /^file_[0-9A-Z]{26}$/);
    assert.equal(stored.input.seed, 3);
    assert.match(res.stderr, new RegExp(`uploaded photo\\.png as ${stored.input.image}`));
    const file = await gw.request('GET', `/v1/files/${stored.input.image}`, { key });
    assert.equal(file.body.filename, 'photo.png');
    assert.equal(file.body.content_type, 'image/png');
  });

  it('a photo on disk becomes a rigged, textured mesh in three commands, each given the URL the one before printed', async () => {
    const glbOf = (stdout: string) => stdout.trim().split('\n').find((u) => new URL(u).pathname.endsWith('.glb'));
    const mesh = await cli([MESH_KIND, '--input', 'image=@photo.png', '--wait']);
    assert.equal(mesh.code, 0, mesh.stderr);
    const meshUrl = glbOf(mesh.stdout);
    assert.ok(meshUrl, mesh.stdout);
    const rig = await cli([RIG_KIND, '--input', `mesh=${meshUrl}`, '--wait']);
    assert.equal(rig.code, 0, rig.stderr);
    const rigUrl = glbOf(rig.stdout);
    assert.ok(rigUrl, rig.stdout);
    const textured = await cli([TEXTURE_KIND, '--input', `mesh=${rigUrl}`, '--input', 'prompt=weathered bronze', '--wait']);
    assert.equal(textured.code, 0, textured.stderr);
    const texturedUrl = glbOf(textured.stdout);
    assert.ok(texturedUrl, textured.stdout);
    const download = async (url: string) => Buffer.from(await (await fetch(url)).arrayBuffer());
    const texturedGlb = await download(texturedUrl);
    const json = readGlb(texturedGlb).json as { materials?: Array<{ pbrMetallicRoughness?: { baseColorTexture?: unknown } }> };
    assert.ok(json.materials?.[0]?.pbrMetallicRoughness?.baseColorTexture, 'textured');
    assert.deepEqual(readMeshGeometry(texturedGlb).positions, readMeshGeometry(await download(rigUrl)).positions, 'on the rigged mesh it was given');
  });

  it('--input FIELD=@PATH with a missing file, or into a field that takes no file, is a usage error and uploads nothing', async () => {
    const filesBefore = (await gw.request('GET', '/v1/files?limit=100', { key })).body.data.length;
    const missing = await cli([MESH_KIND, '--input', 'image=@nowhere.png', '--wait', '--json']);
    assert.equal(missing.code, 2);
    assert.match(missing.stderr, /--input image=@nowhere\.png: no such file/);
    assert.equal(missing.stdout, '');

    const notFileField = await cli([KIND, '--input', 'prompt=@photo.png']);
    assert.equal(notFileField.code, 2);
    assert.match(notFileField.stderr, /prompt is not a file field of inference:image:generate/);
    assert.equal((await gw.request('GET', '/v1/files?limit=100', { key })).body.data.length, filesBefore, 'nothing uploaded');

  });

  it('--input FIELD=TEXT sets a string over the one JSON object; a second JSON object is a usage error', async () => {
    const twoObjects = await cli([KIND, '--input', '{"prompt":"a"}', '--input', '{"seed":1}']);
    assert.equal(twoObjects.code, 2);
    assert.match(twoObjects.stderr, /--input takes one JSON object/);

    // FIELD=TEXT sets a string, over the JSON object.
    const text = await cli([UNSERVED, '--input', '{"prompt":"a door"}', '--input', 'prompt=a gate', '--json']);
    assert.equal(text.code, 0, text.stderr);
    const runId = JSON.parse(text.stdout).run_id;
    assert.equal((await gw.stores.runs.get(runId))!.input.prompt, 'a gate');
    await gw.request('POST', `/v1/jobs/${runId}/cancel`, { key });
  });

  it('--wait prints the artifact URLs one per line; --gateway and --key override the environment', async () => {
    const res = await cli([KIND, '--input', '{"prompt":"a harbour"}', '--wait', '--class', 'interactive', '--gateway', gw.url, '--key', key], { SWITCHYARD_URL: 'http://127.0.0.1:1', SWITCHYARD_API_KEY: 'wrong' });
    assert.equal(res.code, 0, res.stderr);
    const lines = res.stdout.trim().split('\n');
    assert.ok(lines.length > 0);
    for (const url of lines) {
      assert.ok(url.startsWith(`${gw.url}/v1/artifacts/`), url);
      assert.equal((await fetch(url)).status, 200, url);
    }
  });

  it('without --wait prints the run id, or the 202 JSON with --json', async () => {
    const plain = await cli([UNSERVED, '--input', '{"prompt":"a door"}', '--confidentiality', 'trusted']);
    assert.equal(plain.code, 0, plain.stderr);
    const runId = plain.stdout.trim();
    assert.match(runId, /^run_[0-9A-Z]{26}$/);
    const job = await gw.request('GET', `/v1/jobs/${runId}`, { key });
    assert.equal(job.body.confidentiality, 'trusted');
    assert.equal(job.body.status, 'queued');

    const json = await cli([UNSERVED, '--input', '{"prompt":"a door"}', '--json']);
    assert.equal(json.code, 0, json.stderr);
    const accepted = JSON.parse(json.stdout);
    assert.equal(accepted.status, 'queued');
    assert.equal(accepted.kind, UNSERVED);
    for (const id of [runId, accepted.run_id]) await gw.request('POST', `/v1/jobs/${id}/cancel`, { key });
  });

  it('exits 2 with a clear message on usage errors', async () => {
    const badJson = await cli([KIND, '--input', '{prompt: nope}']);
    assert.equal(badJson.code, 2);
    assert.match(badJson.stderr, /--input is not valid JSON/);
    assert.equal(badJson.stdout, '');

    const notObject = await cli([KIND, '--input', '[1,2]']);
    assert.equal(notObject.code, 2);
    assert.match(notObject.stderr, /--input must be a JSON object/);

    const unknown = await cli([KIND, '--input', '{}', '--frobnicate']);
    assert.equal(unknown.code, 2);
    assert.match(unknown.stderr, /--frobnicate/);

    const noKind = await cli(['--input', '{}']);
    assert.equal(noKind.code, 2);
    assert.match(noKind.stderr, /needs a kind/);

    const tier = await cli([KIND, '--input', '{}', '--confidentiality', 'secret']);
    assert.equal(tier.code, 2);
    assert.match(tier.stderr, /--confidentiality must be open, trusted, private/);

    const noKey = await cli([KIND, '--input', '{}'], { SWITCHYARD_API_KEY: '' });
    assert.equal(noKey.code, 2);
    assert.match(noKey.stderr, /SWITCHYARD_API_KEY/);
  });

  it("exits 1 with the gateway's error when it refuses the job", async () => {
    const res = await cli([KIND, '--input', '{"prompt": 7}']);
    assert.equal(res.code, 1);
    assert.match(res.stderr, /400 invalid_request/);
    const unauthorized = await cli([KIND, '--input', '{"prompt":"x"}', '--key', 'sy_live_nope']);
    assert.equal(unauthorized.code, 1);
    assert.match(unauthorized.stderr, /401 unauthorized/);
  });

  it('--wait exits 1 when the run ends canceled, and prints why', async () => {
    const child = spawn(process.execPath, [BIN, 'run', UNSERVED, '--input', '{"prompt":"a door"}', '--wait'], { env: { ...process.env, ...env }, cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] });
    const out = capture(child);
    const runId = await until('the run id on stderr', async () => /(run_[0-9A-Z]{26})/.exec(out.stderr)?.[1]);
    const canceled = await gw.request('POST', `/v1/jobs/${runId}/cancel`, { key });
    assert.equal(canceled.status, 200, canceled.text);
    assert.equal(await out.exit, 1);
    assert.match(out.stderr, new RegExp(`${runId} canceled`));
    assert.equal(out.stdout, '');
  });

  it('Ctrl-C while waiting stops following without canceling, and prints the run id', async () => {
    const child = spawn(process.execPath, [BIN, 'run', UNSERVED, '--input', '{"prompt":"a door"}', '--wait'], { env: { ...process.env, ...env }, cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] });
    const out = capture(child);
    const runId = await until('the run id on stderr', async () => /(run_[0-9A-Z]{26})/.exec(out.stderr)?.[1]);
    child.kill('SIGINT');
    assert.equal(await out.exit, 130);
    assert.equal(out.stdout.trim(), runId);
    assert.match(out.stderr, /the run goes on/);
    const job = await gw.request('GET', `/v1/jobs/${runId}`, { key });
    assert.equal(job.body.status, 'queued', 'the run was not canceled');
    await gw.request('POST', `/v1/jobs/${runId}/cancel`, { key });
  });

  it('draws the progress bar as \\r[#####.....] 50% message', () => {
    assert.equal(progressLine(0.5, 'sampling', 10), '\r[#####.....]  50% sampling\x1b[K');
    assert.equal(progressLine(1, undefined, 4), '\r[####] 100%\x1b[K');
    assert.equal(progressLine(0, 'queued', 4), '\r[....]   0% queued\x1b[K');
  });
});

function capture(child: ReturnType<typeof spawn>) {
  const out = { stdout: '', stderr: '', exit: new Promise<number | null>((r) => child.once('exit', (code) => r(code))) };
  child.stdout!.setEncoding('utf8').on('data', (s: string) => (out.stdout += s));
  child.stderr!.setEncoding('utf8').on('data', (s: string) => (out.stderr += s));
  return out;
}
