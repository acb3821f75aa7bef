import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { encodePng } from '../sdk/engines/demo/png.js';
import { encodeWav } from '../sdk/engines/demo/wav.js';
import { ADMIN_TOKEN, TestGateway, cleanupPrefix, errorCode, uniquePrefix } from './helpers/harness.js';
import { GatewayProcess } from './helpers/gateway-process.js';

const sha256 = (b: Buffer) => createHash('sha256').update(b).digest('hex');
/** A real PNG of `side`² pixels, distinct per seed. */
const png = (side = 8, seed = 1) => encodePng(side, side, 3, Uint8Array.from({ length: side * side * 3 }, (_, i) => (i * seed) % 256));
const wav = () => encodeWav(Int16Array.from({ length: 2000 }, (_, i) => Math.round(8000 * Math.sin(i / 5))));

/** POST /v1/files with a raw body. */
async function rawUpload(gw: TestGateway, key: string, body: Buffer, type: string, filename?: string) {
  return gw.request('POST', `/v1/files${filename ? `?filename=${encodeURIComponent(filename)}` : ''}`, { raw: body, key, headers: { 'content-type': type } });
}

describe('Files API /v1/files', function () {
  this.timeout(30_000);
  const prefix = uniquePrefix('files');
  let gw: TestGateway;
  let key: string;
  let other: string;

  before(async () => {
    gw = await new TestGateway(prefix, { FILE_QUOTA_BYTES: '40kb', FILE_MAX_BYTES: '16kb' }).start();
    key = (await gw.account()).key;
    other = (await gw.account()).key;
  });
  after(async () => {
    await gw?.stop();
    await cleanupPrefix(prefix);
  });

  it('stores a raw upload, describes it, and serves its bytes to its account', async () => {
    const bytes = png(8, 3);
    const res = await rawUpload(gw, key, bytes, 'image/png', 'photo.png');
    assert.equal(res.status, 201, res.text);
    const f = res.body;
    assert.match(f.id, /^file_[0-9A-Z]{26}$/);
    assert.equal(f.url, `${gw.url}/v1/files/${f.id}`);
    assert.equal(res.headers.get('location'), f.url);
    assert.deepEqual({ filename: f.filename, content_type: f.content_type, size: f.size, sha256: f.sha256 }, { filename: 'photo.png', content_type: 'image/png', size: bytes.length, sha256: sha256(bytes) });
    assert.ok(Date.parse(f.expires_at) - Date.parse(f.created_at) >= 7 * 86400_000 - 1000, 'kept FILE_RETENTION_DAYS (7 by default)');
    assert.deepEqual((await gw.request('GET', `/v1/files/${f.id}`, { key })).body, f);
    const content = await fetch(`${f.url}/content`, { headers: { authorization: `Bearer ${key}` } });
    assert.equal(content.status, 200);
    assert.equal(content.headers.get('content-type'), 'image/png');
    assert.equal(content.headers.get('cache-control'), 'private, no-store');
    assert.deepEqual(Buffer.from(await content.arrayBuffer()), bytes);
  });

  it('serves a range of a file, and answers a range past its end 416 range_not_satisfiable with its size', async () => {
    const bytes = png(8, 4);
    const f = (await rawUpload(gw, key, bytes, 'image/png')).body;
    const part = await fetch(`${f.url}/content`, { headers: { authorization: `Bearer ${key}`, range: 'bytes=0-3' } });
    assert.equal(part.status, 206);
    assert.deepEqual(Buffer.from(await part.arrayBuffer()), bytes.subarray(0, 4));
    const res = await gw.request('GET', `/v1/files/${f.id}/content`, { key, headers: { range: `bytes=${bytes.length}-` } });
    assert.equal(res.status, 416);
    assert.equal(errorCode(res), 'range_not_satisfiable');
    assert.equal(res.headers.get('content-range'), `bytes */${bytes.length}`);
    assert.deepEqual(res.body.error.details, { size: bytes.length });
  });

  it("answers 404 for another account's file, whatever the route", async () => {
    const f = (await rawUpload(gw, key, png(4, 5), 'image/png')).body;
    for (const [method, path] of [['GET', `/v1/files/${f.id}`], ['GET', `/v1/files/${f.id}/content`], ['DELETE', `/v1/files/${f.id}`]] as const) {
      const res = await gw.request(method, path, { key: other });
      assert.equal(res.status, 404, `${method} ${path}`);
      assert.equal(errorCode(res), 'not_found');
    }
    assert.equal((await gw.request('GET', `/v1/files/${f.id}`, { key })).status, 200, 'still there for its owner');
    assert.equal((await gw.request('GET', '/v1/files/file_nope', { key })).status, 404);
  });

  it('takes a multipart upload with the part\'s file name and type, streamed', async () => {
    const bytes = wav();
    const form = new FormData();
    form.append('purpose', 'voice');
    form.append('file', new Blob([bytes], { type: 'audio/wav' }), 'voice.wav');
    const res = await fetch(`${gw.url}/v1/files`, { method: 'POST', body: form, headers: { authorization: `Bearer ${key}` } });
    const body = (await res.json()) as Record<string, unknown>;
    assert.equal(res.status, 201, JSON.stringify(body));
    assert.deepEqual({ filename: body.filename, content_type: body.content_type, size: body.size, sha256: body.sha256 }, { filename: 'voice.wav', content_type: 'audio/wav', size: bytes.length, sha256: sha256(bytes) });
  });

  it('refuses a multipart body without a file part, and one with two', async () => {
    const none = new FormData();
    none.append('purpose', 'nothing');
    let res = await fetch(`${gw.url}/v1/files`, { method: 'POST', body: none, headers: { authorization: `Bearer ${key}` } });
    assert.equal(res.status, 400);
    assert.match(((await res.json()) as { error: { message: string } }).error.message, /no file/);
    const two = new FormData();
    two.append('a', new Blob([png()], { type: 'image/png' }), 'a.png');
    two.append('b', new Blob([png()], { type: 'image/png' }), 'b.png');
    res = await fetch(`${gw.url}/v1/files`, { method: 'POST', body: two, headers: { authorization: `Bearer ${key}` } });
    assert.equal(res.status, 400);
    assert.match(((await res.json()) as { error: { message: string } }).error.message, /one file/);
    const listed = await gw.request('GET', '/v1/files?limit=100', { key });
    assert.ok(!listed.body.data.some((f: { filename: string }) => f.filename === 'a.png'), 'the first file of a refused upload is not kept');
  });

  it('types a file from its bytes: a WAV declared as a PNG is refused, a generic type is corrected, nothing refused is kept', async () => {
    const account = await gw.account();
    const refused = await rawUpload(gw, account.key, wav(), 'image/png', 'not-a-picture.png');
    assert.equal(refused.status, 415, refused.text);
    assert.equal(errorCode(refused), 'unsupported_media_type');
    assert.deepEqual(refused.body.error.details, { declared: 'image/png', detected: 'audio/wav' });
    assert.deepEqual((await gw.request('GET', '/v1/files', { key: account.key })).body.data, []);
    const generic = await rawUpload(gw, account.key, png(), 'application/octet-stream');
    assert.equal(generic.status, 201, generic.text);
    assert.equal(generic.body.content_type, 'image/png');
    assert.equal(generic.body.filename, 'upload.png');
  });

  it('refuses unsafe file names and compressed bodies', async () => {
    for (const name of ['../etc/passwd', '.hidden', 'a/b.png']) {
      const res = await rawUpload(gw, key, png(), 'image/png', name);
      assert.equal(res.status, 400, name);
      assert.match(res.body.error.message, /^filename/);
    }
    const res = await gw.request('POST', '/v1/files', { raw: png(), key, headers: { 'content-type': 'image/png', 'content-encoding': 'gzip' } });
    assert.equal(res.status, 415);
  });

  it('refuses a file over FILE_MAX_BYTES with 413, declared or streamed, and keeps nothing', async () => {
    const account = await gw.account();
    const big = Buffer.alloc(17 * 1024, 1);
    const declared = await rawUpload(gw, account.key, big, 'application/octet-stream');
    assert.equal(declared.status, 413);
    assert.equal(declared.body.error.details.max_bytes, 16 * 1024);
    const streamed = await fetch(`${gw.url}/v1/files`, {
      method: 'POST',
      headers: { authorization: `Bearer ${account.key}`, 'content-type': 'application/octet-stream' },
      body: new ReadableStream({ start(c) { c.enqueue(big); c.close(); } }),
      duplex: 'half',
    } as RequestInit);
    assert.equal(streamed.status, 413, await streamed.clone().text());
    assert.deepEqual((await gw.request('GET', '/v1/files', { key: account.key })).body.data, []);
  });

  it('keeps an account within FILE_QUOTA_BYTES: 409 quota_exceeded until a file is deleted', async () => {
    const account = await gw.account();
    const chunk = (n: number) => Buffer.alloc(15 * 1024, n);
    const ids: string[] = [];
    for (let i = 0; i < 2; i++) {
      const res = await rawUpload(gw, account.key, chunk(i), 'application/octet-stream');
      assert.equal(res.status, 201, res.text);
      ids.push(res.body.id);
    }
    const over = await rawUpload(gw, account.key, chunk(9), 'application/octet-stream');
    assert.equal(over.status, 409, over.text);
    assert.equal(errorCode(over), 'quota_exceeded');
    assert.deepEqual(over.body.error.details, { quota_bytes: 40 * 1024, used_bytes: 30 * 1024 });
    // The listing tells the same before anyone hits the wall: every file's bytes, whatever the page.
    assert.deepEqual((await gw.request('GET', '/v1/files?limit=1', { key: account.key })).body.quota, { used_bytes: 30 * 1024, quota_bytes: 40 * 1024 });
    assert.equal((await gw.request('DELETE', `/v1/files/${ids[0]}`, { key: account.key })).status, 204);
    assert.deepEqual((await gw.request('GET', '/v1/files', { key: account.key })).body.quota, { used_bytes: 15 * 1024, quota_bytes: 40 * 1024 });
    assert.equal((await gw.request('GET', `/v1/files/${ids[0]}/content`, { key: account.key })).status, 404);
    assert.equal((await rawUpload(gw, account.key, chunk(9), 'application/octet-stream')).status, 201);
  });

  it('lists files newest first, page by page with cursor', async () => {
    const account = await gw.account();
    const made: string[] = [];
    for (let i = 0; i < 3; i++) made.push((await rawUpload(gw, account.key, png(4, i + 7), 'image/png')).body.id);
    const first = await gw.request('GET', '/v1/files?limit=2', { key: account.key });
    assert.deepEqual(first.body.data.map((f: { id: string }) => f.id), [made[2], made[1]]);
    assert.equal(typeof first.body.next_cursor, 'string');
    const second = await gw.request('GET', `/v1/files?limit=2&cursor=${first.body.next_cursor}`, { key: account.key });
    assert.deepEqual(second.body.data.map((f: { id: string }) => f.id), [made[0]]);
    assert.equal(second.body.next_cursor, null);
    assert.equal((await gw.request('GET', '/v1/files?cursor=bogus', { key: account.key })).status, 400);
    assert.equal((await gw.request('GET', '/v1/files?limit=0', { key: account.key })).status, 400);
  });

  it('deletes files past their retention in the sweep, bytes and quota included', async () => {
    const account = await gw.account();
    const f = (await rawUpload(gw, account.key, png(4, 11), 'image/png')).body;
    const later = new Date(Date.now() + 8 * 86400_000);
    assert.ok((await gw.services.files.sweep(later)) >= 1);
    assert.equal((await gw.request('GET', `/v1/files/${f.id}`, { key: account.key })).status, 404);
    assert.equal(await gw.stores.files.usedBytes((await gw.request('GET', '/v1/account', { key: account.key })).body.id), 0);
    const stored = await gw.services.files.list(account.id, { limit: 10 });
    assert.deepEqual(stored, []);
  });

  it('requires the account key', async () => {
    assert.equal((await gw.request('POST', '/v1/files', { raw: png(), headers: { 'content-type': 'image/png' } })).status, 401);
    assert.equal((await gw.request('GET', '/v1/files')).status, 401);
  });
});

describe('Files API memory: a large upload is streamed, not held', function () {
  this.timeout(120_000);
  const prefix = uniquePrefix('files-mem');
  let gateway: GatewayProcess | undefined;
  after(async () => {
    await gateway?.kill();
    await cleanupPrefix(prefix);
  });

  /** The gateway's peak resident memory so far, in bytes (Linux /proc). */
  const peakRss = (pid: number) => Number(/VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) * 1024;

  /** Streams `mb` MiB of 7s to /v1/files; resolves with the answer and the sha256 of what was sent. */
  async function upload(url: string, key: string, mb: number) {
    const size = mb * 1024 * 1024;
    const block = Buffer.alloc(1024 * 1024, 7);
    const hash = createHash('sha256');
    let sent = 0;
    const body = new ReadableStream({
      pull(c) {
        if (sent >= size) return c.close();
        hash.update(block);
        sent += block.length;
        c.enqueue(block);
      },
    });
    const res = await fetch(`${url}/v1/files?filename=big.bin`, { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/octet-stream' }, body, duplex: 'half' } as RequestInit);
    return { status: res.status, file: (await res.json()) as { size: number; sha256: string }, sha256: hash.digest('hex'), size };
  }

  it('takes a 60 MB file with the gateway growing by less than half of it', async () => {
    gateway = await new GatewayProcess({ REDIS_PREFIX: prefix }).start();
    const res = await fetch(`${gateway.url}/v1/admin/accounts`, { method: 'POST', headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' }, body: JSON.stringify({ name: 'mem', credits: 0 }) });
    const key = ((await res.json()) as { api_key: string }).api_key;
    // A first upload brings the process to its working size for uploads: the socket's read
    // buffers are garbage as soon as they are written, but V8 collects them only once its young
    // generation fills (up to ~48 MB on Node 20), whatever the file's size. What must not grow
    // with the size of the file is measured from there.
    const warm = await upload(gateway.url, key, 16);
    assert.equal(warm.status, 201, JSON.stringify(warm.file));
    const before = peakRss(gateway.child.pid!);
    const big = await upload(gateway.url, key, 60);
    assert.equal(big.status, 201, JSON.stringify(big.file));
    assert.equal(big.file.size, big.size);
    assert.equal(big.file.sha256, big.sha256);
    // A held file would add at least its 60 MB. Streamed, the growth is the young generation
    // reaching its full size (about 20 MB on Node 20, a little over or under from run to run).
    const grown = peakRss(gateway.child.pid!) - before;
    assert.ok(grown < 30 * 1024 * 1024, `the gateway's peak RSS grew by ${(grown / 1048576).toFixed(1)} MB`);
  });
});
