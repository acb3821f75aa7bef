import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { SwitchyardApiError, SwitchyardBadRequestError, SwitchyardClient, SwitchyardError, SwitchyardNotFoundError, type SwitchyardFile } from '../sdk/client/index.js';
import { encodePng } from '../sdk/engines/demo/png.js';
import { TestGateway, cleanupPrefix, uniquePrefix } from './helpers/harness.js';
import { sampleWav } from './helpers/sample-files.js';

const MESH_KIND = 'inference:3d:image-to-mesh';
const sha256 = (b: Uint8Array) => createHash('sha256').update(b).digest('hex');

/** A small PNG whose pixels depend on `seed`, so each test uploads distinct bytes. */
function png(seed: number, size = 8): Buffer {
  const pixels = new Uint8Array(size * size * 3).map((_, i) => (i * 31 + seed * 17) & 0xff);
  return encodePng(size, size, 3, pixels);
}

describe('client library: files (client.files and files in job inputs)', () => {
  const prefix = uniquePrefix('clientfiles');
  let gw: TestGateway;
  let key: string;
  let client: SwitchyardClient;
  /** Every URL the client fetched, in order. */
  let requested: string[];
  let dir: string;

  before(async () => {
    gw = await new TestGateway(prefix).start();
    ({ key } = await gw.account(10_000));
    requested = [];
    client = new SwitchyardClient({ baseUrl: gw.url, apiKey: key, fetch: (url, init) => (requested.push(`${init?.method ?? 'GET'} ${new URL(url).pathname}`), fetch(url, init)) });
    dir = mkdtempSync(path.join(os.tmpdir(), 'switchyard-client-files-'));
  });
  after(async () => {
    await gw?.stop();
    await cleanupPrefix(prefix);
    rmSync(dir, { recursive: true, force: true });
  });

  function writePng(name: string, seed: number): { file: string; bytes: Buffer } {
    const bytes = png(seed);
    const file = path.join(dir, name);
    writeFileSync(file, bytes);
    return { file, bytes };
  }

  it('uploads a local path: named after it, typed from its extension, the bytes intact', async () => {
    const { file, bytes } = writePng('photo.png', 1);
    const uploaded = await client.files.upload(file);
    assert.match(uploaded.id, /^file_[0-9A-Z]{26}$/);
    assert.equal(uploaded.filename, 'photo.png');
    assert.equal(uploaded.content_type, 'image/png');
    assert.equal(uploaded.size, bytes.length);
    assert.equal(uploaded.sha256, sha256(bytes));
    assert.equal(uploaded.url, `${gw.url}/v1/files/${uploaded.id}`);
    assert.ok(Date.parse(uploaded.expires_at) > Date.parse(uploaded.created_at));
  });

  it('uploads a Blob, a File (its name) and bytes (with filename and contentType)', async () => {
    const blobBytes = png(2);
    const fromBlob = await client.files.upload(new Blob([blobBytes], { type: 'image/png' }), { filename: 'from-blob.png' });
    assert.equal(fromBlob.filename, 'from-blob.png');
    assert.equal(fromBlob.content_type, 'image/png');
    assert.equal(fromBlob.sha256, sha256(blobBytes));

    const fileBytes = png(3);
    const fromFile = await client.files.upload(new File([fileBytes], 'picked.png', { type: 'image/png' }));
    assert.equal(fromFile.filename, 'picked.png');
    assert.equal(fromFile.sha256, sha256(fileBytes));

    const raw = png(4);
    const fromBytes = await client.files.upload(raw, { filename: 'raw.png', contentType: 'image/png' });
    assert.equal(fromBytes.filename, 'raw.png');
    assert.equal(fromBytes.content_type, 'image/png');
    // Without a name or type, the gateway types the bytes and names the file after the type.
    const anonymous = await client.files.upload(new Uint8Array(png(5)));
    assert.equal(anonymous.content_type, 'image/png');
    assert.equal(anonymous.filename, 'upload.png');
  });

  it('lists with a cursor, gets, reads the content and deletes a file', async () => {
    const a = await client.files.upload(png(6), { filename: 'a.png' });
    const b = await client.files.upload(png(7), { filename: 'b.png' });
    const first = await client.files.list({ limit: 1 });
    assert.deepEqual(first.data.map((f) => f.id), [b.id], 'newest first');
    assert.ok(first.next_cursor);
    assert.ok(first.quota && first.quota.used_bytes >= a.size + b.size && first.quota.quota_bytes > first.quota.used_bytes, 'the quota of all the files, not the page');
    const second = await client.files.list({ limit: 1, cursor: first.next_cursor! });
    assert.deepEqual(second.data.map((f) => f.id), [a.id]);

    assert.deepEqual(await client.files.get(a.id), a);
    const res = await client.files.content(a.id);
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('content-type'), 'image/png');
    assert.equal(sha256(new Uint8Array(await res.arrayBuffer())), a.sha256);

    await client.files.delete(a.id);
    await assert.rejects(client.files.get(a.id), SwitchyardNotFoundError);
    await assert.rejects(client.files.content(a.id), SwitchyardNotFoundError);
    await assert.rejects(client.files.delete(a.id), SwitchyardNotFoundError);
    assert.ok(!(await client.files.list({ limit: 100 })).data.some((f) => f.id === a.id));
  });

  it('a refused upload is a typed error with the envelope; an unreadable path is a SwitchyardError sent nowhere', async () => {
    const err = await client.files.upload(sampleWav(), { filename: 'sound.png', contentType: 'image/png' }).catch((e: unknown) => e);
    assert.ok(err instanceof SwitchyardApiError, String(err));
    assert.equal(err.status, 415);
    assert.equal(err.code, 'unsupported_media_type');
    assert.equal(err.details?.declared, 'image/png');
    assert.equal(err.details?.detected, 'audio/wav');
    assert.equal((err.body as { error: { code: string } }).error.code, 'unsupported_media_type');

    const before = requested.length;
    const missing = await client.files.upload(path.join(dir, 'nope.png')).catch((e: unknown) => e);
    assert.ok(missing instanceof SwitchyardError && !(missing instanceof SwitchyardApiError), String(missing));
    assert.match((missing as Error).message, /nope\.png/);
    assert.equal(requested.length, before, 'no request for a file that cannot be opened');
  });

  it("submit uploads an '@path' and a Blob in file fields and puts their ids in the run's input", async () => {
    const { file, bytes } = writePng('to-mesh.png', 8);
    const heard: Array<[string, SwitchyardFile]> = [];
    const capsBefore = requested.filter((r) => r.endsWith('/v1/capabilities')).length;
    const run = await client.submit({ kind: MESH_KIND, input: { image: `@${file}`, seed: 3 } }, { onUpload: (field, f) => heard.push([field, f]) });
    const stored = (await gw.stores.runs.get(run.run_id))!;
    assert.match(String(stored.input.image), /^file_[0-9A-Z]{26}$/);
    assert.equal(stored.input.seed, 3);
    assert.deepEqual(heard.map(([field, f]) => [field, f.id]), [['image', stored.input.image]]);
    assert.equal(heard[0][1].sha256, sha256(bytes));
    assert.equal(heard[0][1].filename, 'to-mesh.png');

    const blobBytes = png(9);
    const second = await client.submit({ kind: MESH_KIND, input: { image: new Blob([blobBytes], { type: 'image/png' }) } });
    const secondInput = (await gw.stores.runs.get(second.run_id))!.input;
    assert.equal((await client.files.get(String(secondInput.image))).sha256, sha256(blobBytes));
    assert.equal(requested.filter((r) => r.endsWith('/v1/capabilities')).length - capsBefore, 1, 'the file fields are read once per client');
    for (const id of [run.run_id, second.run_id]) await client.cancel(id);
  });

  it("submit leaves alone '@' strings of other fields and inputs without files, and deletes its uploads when the job is refused", async () => {
    const fresh = new SwitchyardClient({ baseUrl: gw.url, apiKey: key, fetch: (url, init) => (requested.push(`${init?.method ?? 'GET'} ${new URL(url).pathname}`), fetch(url, init)) });
    const before = requested.length;
    const plain = await fresh.submit({ kind: 'inference:image:generate', input: { prompt: 'a lighthouse' } });
    assert.deepEqual(requested.slice(before), ['POST /v1/jobs'], 'no capabilities and no upload without a file value');
    const mention = await fresh.submit({ kind: 'inference:3d:text-to-mesh', input: { prompt: '@alice a chair' } });
    assert.equal((await gw.stores.runs.get(mention.run_id))!.input.prompt, '@alice a chair');
    await assert.rejects(fresh.submit({ kind: 'inference:3d:text-to-mesh', input: { prompt: new Blob(['x']) } }), TypeError);
    for (const id of [plain.run_id, mention.run_id]) await fresh.cancel(id);

    const { file } = writePng('refused.png', 10);
    const filesBefore = (await fresh.files.list({ limit: 100 })).data.length;
    const refused = await fresh.submit({ kind: MESH_KIND, input: { image: `@${file}`, seed: -1 } }).catch((e: unknown) => e);
    assert.ok(refused instanceof SwitchyardBadRequestError, String(refused));
    assert.ok(requested.includes('POST /v1/files'));
    assert.equal((await fresh.files.list({ limit: 100 })).data.length, filesBefore, 'the upload of a refused job is deleted');
  });
});
