import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import WebSocket from 'ws';
import { FILE_KEYWORD, KINDS, fileFields } from '../models/kinds.js';
import { SwitchyardWorker, silentLogger } from '../sdk/worker/index.js';
import { createDemoEngine } from '../sdk/engines/demo/index.js';
import { encodePng } from '../sdk/engines/demo/png.js';
import { TestGateway, cleanupPrefix, errorCode, uniquePrefix, until } from './helpers/harness.js';
import { RawWorker } from './helpers/raw-worker.js';
import { dataUri, sampleGlb, samplePng, sampleWav } from './helpers/sample-files.js';
import { ToolServer } from './helpers/tool-server.js';

/**
 * File fields of job inputs (docs/files.md): the catalogue marks them, and the gateway stages
 * each file before the run exists, from a file of the account, an artifact of one of its runs,
 * an https URL (fetched through the SSRF guard) or a data: URI. Anything else is 400 naming the
 * field, before any credit moves. Workers get the files from the gateway, through their lease.
 */
const FILE_FIELDS: Array<[kind: string, field: string, accept: string[]]> = KINDS.flatMap((spec) =>
  Object.entries(fileFields(spec)).map(([field, f]) => [spec.kind, field, f.accept] as [string, string, string[]]),
);
const REFUSED = ['file:///etc/passwd', 'not a url', 'http://example.com/a.png', 'ftp://example.com/a.png', 'https://', '/etc/passwd', 'javascript:alert(1)', 'file_01M000000000000000000000AA'];
/** Addresses outside the test's allowed 127.0.0.1/32, on the port the test allows. */
const BLOCKED = (port: number) => [`https://127.0.0.2:${port}/a.png`, `https://10.1.2.3:${port}/a.png`, `https://[::1]:${port}/a.png`, `https://169.254.169.254:${port}/latest/meta-data`, `https://0x7f000002:${port}/a.png`];

/** An input valid for every kind but for `field`. */
const inputWith = (field: string, value: string) => ({ prompt: 'a cat', text: 'hello', [field]: value });
const sha256 = (b: Buffer) => createHash('sha256').update(b).digest('hex');

describe('job file inputs', function () {
  this.timeout(30_000);
  const prefix = uniquePrefix('file-inputs');
  const dir = mkdtempSync(path.join(os.tmpdir(), 'file-inputs-'));
  const origin = new ToolServer(dir);
  let gw: TestGateway;
  const CREDITS = 10_000;
  let caller: { id: string; key: string };
  let files: Record<string, string>;

  before(async () => {
    await origin.start();
    gw = await new TestGateway(prefix, { OUTBOUND_CA_FILE: origin.caFile, OUTBOUND_ALLOW_CIDRS: '127.0.0.1/32', OUTBOUND_ALLOWED_PORTS: String(origin.port), DATA_URI_MAX_BYTES: '64kb' }).start();
    caller = await gw.account(CREDITS, 'file-inputs');
    files = { image: dataUri('image/png', samplePng()), mesh: dataUri('model/gltf-binary', await sampleGlb()), audio: dataUri('audio/wav', sampleWav()) };
  });
  after(async () => {
    await gw?.stop();
    await origin.stop();
    await cleanupPrefix(prefix);
    rmSync(dir, { recursive: true, force: true });
  });

  const fileFor = (accept: string[]) => (accept.includes('image/png') ? files.image : accept.includes('model/gltf-binary') ? files.mesh : files.audio);

  it('the catalogue marks its file fields, with the types each takes, and shows them in /v1/capabilities and OpenAPI', async () => {
    assert.deepEqual(new Set(FILE_FIELDS.map(([, field]) => field)), new Set(['image', 'mesh', 'audio', 'reference_audio']));
    const caps = await gw.request('GET', '/v1/capabilities', { key: caller.key });
    const mesh = caps.body.kinds?.find?.((k: { kind: string }) => k.kind === 'inference:3d:image-to-mesh') ?? caps.body.data?.find((k: { kind: string }) => k.kind === 'inference:3d:image-to-mesh');
    assert.deepEqual(mesh.input_schema.properties.image[FILE_KEYWORD], { accept: ['image/png', 'image/jpeg', 'image/webp'] });
    const openapi = JSON.stringify((await gw.request('GET', '/v1/openapi.json')).body);
    assert.ok(openapi.includes(FILE_KEYWORD), 'the OpenAPI document shows the marker');
  });

  it('refuses every other value with 400 naming the field, over HTTP and on the caller socket', async () => {
    for (const [kind, field] of FILE_FIELDS) {
      for (const value of REFUSED) {
        const res = await gw.submit(caller.key, { kind, input: inputWith(field, value) });
        assert.equal(res.status, 400, `${kind} ${field}=${JSON.stringify(value)}: ${res.text}`);
        assert.equal(errorCode(res), 'invalid_request');
        assert.match(res.body.error.message, new RegExp(`/input/${field}`));
      }
    }
    const ws = new WebSocket(`${gw.url.replace(/^http/, 'ws')}/v1/ws`, { headers: { authorization: `Bearer ${caller.key}` } });
    const messages: Array<Record<string, any>> = [];
    ws.on('message', (data) => messages.push(JSON.parse(data.toString())));
    await until('authenticated', async () => messages.some((m) => m.type === 'authenticated'));
    try {
      ws.send(JSON.stringify({ type: 'submit', id: 'bad', kind: 'inference:rig', input: { mesh: 'file:///etc/passwd' } }));
      const answer = await until('the answer', async () => messages.find((m) => m.id === 'bad'));
      assert.equal(answer.code, 'invalid_request');
      assert.match(answer.message, /\/input\/mesh must be a file id/);
    } finally {
      ws.close();
    }
  });

  it('refuses a file of a type the field does not take', async () => {
    const res = await gw.submit(caller.key, { kind: 'inference:3d:image-to-mesh', input: { image: files.audio } });
    assert.equal(res.status, 400, res.text);
    assert.match(res.body.error.message, /\/input\/image takes image\/png, image\/jpeg, image\/webp; the file given is audio\/wav/);
  });

  it('refuses https URLs the SSRF guard blocks, redirects, failed fetches and oversize data: URIs', async () => {
    for (const url of BLOCKED(origin.port)) {
      const res = await gw.submit(caller.key, { kind: 'inference:3d:image-to-mesh', input: { image: url } });
      assert.equal(res.status, 400, `${url}: ${res.text}`);
      assert.equal(errorCode(res), 'url_blocked', url);
    }
    origin.script('/moved.png', { status: 302, headers: { location: 'https://127.0.0.1:1/inner.png' } });
    let res = await gw.submit(caller.key, { kind: 'inference:3d:image-to-mesh', input: { image: origin.url('/moved.png') } });
    assert.equal(res.status, 400);
    assert.match(res.body.error.message, /redirect/);
    origin.script('/missing.png', { status: 404 });
    res = await gw.submit(caller.key, { kind: 'inference:3d:image-to-mesh', input: { image: origin.url('/missing.png') } });
    assert.equal(res.status, 400);
    assert.match(res.body.error.message, /answered 404/);
    const noisy = encodePng(160, 160, 3, randomBytes(160 * 160 * 3)); // incompressible: well over 64 KB
    res = await gw.submit(caller.key, { kind: 'inference:3d:image-to-mesh', input: { image: dataUri('image/png', noisy) } });
    assert.equal(res.status, 413, res.text);
    assert.match(res.body.error.message, /data: URI may carry at most 65536 bytes/);
  });

  it('after the refusals: no run exists and the balance is untouched', async () => {
    const account = await gw.request('GET', '/v1/account', { key: caller.key });
    assert.deepEqual({ credits: account.body.credits, reserved: account.body.reserved }, { credits: CREDITS, reserved: 0 });
    assert.deepEqual((await gw.request('GET', '/v1/jobs?limit=100', { key: caller.key })).body.data, []);
  });

  it('accepts a file id, a file URL, a data: URI and an https URL, each staged as a file of the account', async () => {
    const other = await gw.account(CREDITS, 'file-inputs-accepted');
    const png = samplePng(8, 5);
    const uploaded = (await gw.request('POST', '/v1/files', { raw: png, key: other.key, headers: { 'content-type': 'image/png' } })).body;
    origin.script('/photo.png', { status: 200, headers: { 'content-type': 'image/png' }, body: png });
    for (const value of [uploaded.id, uploaded.url, dataUri('image/png', png), origin.url('/photo.png')]) {
      const res = await gw.submit(other.key, { kind: 'inference:3d:image-to-mesh', input: { image: value } });
      assert.equal(res.status, 202, `${value.slice(0, 60)}: ${res.text}`);
      const stored = (await gw.stores.runs.get(res.body.run_id))!;
      assert.match(String(stored.input.image), /^file_/, 'the run keeps the gateway\'s file, never the caller\'s URL');
      const file = (await gw.request('GET', `/v1/files/${stored.input.image}`, { key: other.key })).body;
      assert.equal(file.sha256, sha256(png));
    }
    // Every field of the catalogue takes its type.
    for (const [kind, field, accept] of FILE_FIELDS) {
      const res = await gw.submit(other.key, { kind, input: inputWith(field, fileFor(accept)) });
      assert.equal(res.status, 202, `${kind} ${field}: ${res.text}`);
    }
    // Another account's file is not this account's.
    const res = await gw.submit(caller.key, { kind: 'inference:3d:image-to-mesh', input: { image: uploaded.id } });
    assert.equal(res.status, 400);
    assert.match(res.body.error.message, /no file file_\w+ of this account/);
  });

  it('serves a lease its own files only, with its upload token', async () => {
    const acct = await gw.account(CREDITS, 'lease-files');
    const token = await gw.workerToken('open', 'op-lease-files');
    // Slots for every queued job of the kind (earlier tests left some): the two of this test are among them.
    const worker = await new RawWorker(gw.url, token).connect({ kinds: ['inference:3d:image-to-mesh'], slots: 32 });
    try {
      const runs: string[] = [];
      for (let i = 0; i < 2; i++) runs.push((await gw.submit(acct.key, { kind: 'inference:3d:image-to-mesh', input: { image: dataUri('image/png', samplePng(8, 20 + i)) } })).body.run_id);
      const mine = await until('both leases', async () => {
        const got = worker.leases().filter((l) => runs.includes(l.run_id));
        return got.length === 2 ? got : undefined;
      });
      const first = mine.find((l) => l.run_id === runs[0])!;
      const second = mine.find((l) => l.run_id === runs[1])!;
      const sent = samplePng(8, 20);
      const f = first.files.image;
      assert.deepEqual({ size: f.size, content_type: f.content_type, sha256: f.sha256 }, { size: sent.length, content_type: 'image/png', sha256: sha256(sent) });
      assert.ok(!JSON.stringify(first).includes('data:'), 'the lease carries no copy of the caller\'s value');
      const got = await fetch(f.url, { headers: { authorization: `Bearer ${first.upload_token}` } });
      assert.equal(got.status, 200);
      assert.equal(sha256(Buffer.from(await got.arrayBuffer())), f.sha256);
      // Another lease's token opens nothing here, nor does none.
      assert.equal((await fetch(f.url, { headers: { authorization: `Bearer ${second.upload_token}` } })).status, 401);
      assert.equal((await fetch(f.url)).status, 401);
      assert.equal((await fetch(f.url.replace(/image$/, 'mesh'), { headers: { authorization: `Bearer ${first.upload_token}` } })).status, 404);
    } finally {
      worker.close();
    }
  });

  it('a photo on disk becomes a mesh, then a rigged mesh, then a textured one, each step reading the bytes of the one before', async () => {
    const acct = await gw.account(CREDITS, 'chain');
    const token = await gw.workerToken('open', 'op-chain');
    const worker = new SwitchyardWorker({ gateway: gw.url, token, kinds: 'all', slots: 2, handler: createDemoEngine({ delayMs: 0 }), logger: silentLogger });
    await worker.start();
    try {
      const photo = samplePng(16, 3);
      const upload = (await gw.request('POST', '/v1/files?filename=photo.png', { raw: photo, key: acct.key, headers: { 'content-type': 'image/png' } })).body;
      const run = async (kind: string, input: object) => {
        const res = await gw.submit(acct.key, { kind, input }, { prefer: 'wait=20' });
        assert.ok(res.status === 201 || res.status === 202, res.text);
        const done = await until(`${kind} to succeed`, async () => {
          const job = (await gw.request('GET', `/v1/jobs/${res.body.run_id}`, { key: acct.key })).body;
          return job.terminal ? job : undefined;
        }, 20_000);
        assert.equal(done.status, 'succeeded', JSON.stringify(done.error));
        return (done.output.urls as string[]).find((u) => u.endsWith('.glb'))!;
      };
      const glbOf = async (url: string) => Buffer.from(await (await fetch(url)).arrayBuffer());
      const jsonOf = (glb: Buffer) => JSON.parse(glb.subarray(20, 20 + glb.readUInt32LE(12)).toString('utf8'));
      const meshUrl = await run('inference:3d:image-to-mesh', { image: upload.id });
      const mesh = await glbOf(meshUrl);
      assert.equal(jsonOf(mesh).asset.extras.input.sha256, sha256(photo), 'the mesh was made from the photo');
      const riggedUrl = await run('inference:rig', { mesh: meshUrl });
      const rigged = jsonOf(await glbOf(riggedUrl));
      assert.ok(rigged.skins?.length, 'the rig added a skin');
      assert.deepEqual(rigged.accessors[0].count, jsonOf(mesh).accessors[0].count, 'and kept the mesh it was given');
      const texturedUrl = await run('inference:texture:generate', { mesh: riggedUrl, prompt: 'rusty metal' });
      const textured = jsonOf(await glbOf(texturedUrl));
      assert.ok(textured.materials?.[0]?.pbrMetallicRoughness?.baseColorTexture, 'the texture step mapped a texture');
      // Another account cannot chain from these artifacts.
      const stranger = await gw.account(CREDITS, 'stranger');
      const res = await gw.submit(stranger.key, { kind: 'inference:rig', input: { mesh: meshUrl } });
      assert.equal(res.status, 400);
      assert.match(res.body.error.message, /not one of this account/);
    } finally {
      await worker.stop({ timeoutMs: 0 });
    }
  });
});
