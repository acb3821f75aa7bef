import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import fsp from 'node:fs/promises';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import v8 from 'node:v8';
import vm from 'node:vm';
import { Validator } from '@seriousme/openapi-schema-validator';
import { ArtifactSweeper } from '../api/services/artifacts/artifact-sweeper.js';
import { LeaseStore } from '../dispatch/lease-store.js';
import { artifactContentType, checkArtifactName } from '../models/artifact-store.js';
import { hashSecret } from '../models/credentials.js';
import { FsArtifactStore } from '../models/fs-artifact-store.js';
import { newRunId } from '../models/ids.js';
import { TestGateway, cleanupPrefix, errorCode, uniquePrefix } from './helpers/harness.js';
import { freePort } from './helpers/ports.js';

v8.setFlagsFromString('--expose-gc');
const forceGc: () => void = (() => {
  const gc = vm.runInNewContext('gc') as unknown;
  return typeof gc === 'function' ? (gc as () => void) : () => {};
})();

const sha256 = (data: Buffer | string): string => createHash('sha256').update(data).digest('hex');


/** Every file under `dir`, recursively (directories themselves are not listed). */
async function filesUnder(dir: string): Promise<string[]> {
  const entries = await fsp.readdir(dir, { withFileTypes: true, recursive: true });
  return entries.filter((e) => e.isFile()).map((e) => path.join(e.parentPath ?? (e as unknown as { path: string }).path, e.name));
}

interface TestLease {
  lease_id: string;
  token: string;
  run_id: string;
}

describe('artifacts: uploads with a lease, public downloads, retention', function () {
  const prefix = uniquePrefix('artifacts');
  let dataDir: string;
  let smallDir: string;
  let gw: TestGateway;
  let small: TestGateway;
  let leases: LeaseStore;

  before(async () => {
    dataDir = await fsp.mkdtemp(path.join(os.tmpdir(), 'sy-artifacts-'));
    smallDir = await fsp.mkdtemp(path.join(os.tmpdir(), 'sy-artifacts-small-'));
    // A fixed port, so that PUBLIC_URL's default (http://HOST:PORT) is the very origin served:
    // the URLs the uploads return are fetched as they are.
    // The filesystem store, whatever the run's storage (the cluster pass's is S3): these tests
    // look at its files. test/artifacts-s3.test.ts is the same promises on S3.
    gw = await new TestGateway(prefix, { DATA_DIR: dataDir, PORT: String(await freePort()), ARTIFACT_MAX_BYTES: '200mb', STORAGE: 'fs' }).start();
    small = await new TestGateway(prefix, { DATA_DIR: smallDir, ARTIFACT_MAX_BYTES: '1kb', STORAGE: 'fs' }).start();
    leases = new LeaseStore(gw.redis, prefix);
  });
  after(async () => {
    await gw?.stop();
    await small?.stop();
    await cleanupPrefix(prefix);
    for (const dir of [dataDir, smallDir]) if (dir) await fsp.rm(dir, { recursive: true, force: true });
  });

  async function lease(ttlMs = 60_000): Promise<TestLease> {
    const token = `upl_${randomBytes(24).toString('base64url')}`;
    const l = { lease_id: `lse_${randomBytes(12).toString('hex')}`, token, run_id: newRunId('acct_test') };
    await leases.put(
      {
        lease_id: l.lease_id,
        run_id: l.run_id,
        account_id: 'acct_test',
        worker_id: 'wkr_test',
        kind: 'inference:image:generate',
        tier: 'open',
        fence: 1,
        upload_hash: hashSecret(token),
        gateway_id: 'gw_test',
      },
      ttlMs,
    );
    return l;
  }

  function upload(target: TestGateway, l: TestLease, name: string | null, body: Buffer | string, headers: Record<string, string> = {}) {
    const query = name === null ? '' : `?name=${encodeURIComponent(name)}`;
    return target.request('POST', `/v1/leases/${l.lease_id}/artifacts${query}`, {
      raw: body,
      headers: { authorization: `Bearer ${l.token}`, ...headers },
    });
  }

  /** Uploads `bytes` as a PNG and returns the answer's body. */
  async function uploaded(bytes: Buffer, name = 'out.png'): Promise<{ url: string; sha256: string; size: number; content_type: string }> {
    const res = await upload(gw, await lease(), name, bytes, { 'content-type': 'image/png' });
    assert.equal(res.status, 201, res.text);
    return res.body;
  }

  const idOf = (url: string): string => new URL(url).pathname.split('/')[3];

  it('stores an upload and serves it at an absolute URL, byte for byte, with the documented headers', async () => {
    const bytes = randomBytes(10_000);
    const res = await upload(gw, await lease(), 'image.png', bytes, { 'content-type': 'image/png' });
    assert.equal(res.status, 201, res.text);
    assert.equal(res.body.sha256, sha256(bytes));
    assert.equal(res.body.size, bytes.length);
    assert.equal(res.body.content_type, 'image/png');
    assert.ok(res.body.url.startsWith(`${gw.config.publicUrl}/v1/artifacts/`), res.body.url);
    assert.match(res.body.url, /^http:\/\/127\.0\.0\.1:\d+\/v1\/artifacts\/[a-z2-7]{32}\/image\.png$/);

    // A plain GET, no header at all (what <img src> does).
    const get = await fetch(res.body.url);
    assert.equal(get.status, 200);
    assert.deepEqual(Buffer.from(await get.arrayBuffer()), bytes);
    assert.equal(get.headers.get('content-type'), 'image/png');
    assert.equal(get.headers.get('content-length'), String(bytes.length));
    assert.equal(get.headers.get('etag'), `"${sha256(bytes)}"`);
    assert.equal(get.headers.get('accept-ranges'), 'bytes');
    assert.equal(get.headers.get('cache-control'), 'public, max-age=31536000, immutable');
    assert.equal(get.headers.get('x-content-type-options'), 'nosniff');
    assert.equal(get.headers.get('access-control-allow-origin'), '*');
    assert.ok(get.headers.get('x-request-id'));

    const head = await fetch(res.body.url, { method: 'HEAD' });
    assert.equal(head.status, 200);
    assert.equal(head.headers.get('content-length'), String(bytes.length));
    assert.equal(head.headers.get('etag'), `"${sha256(bytes)}"`);
    assert.equal(head.headers.get('content-type'), 'image/png');
    assert.equal((await head.arrayBuffer()).byteLength, 0);
  });

  it('takes the content type from the upload, else from the extension, and never serves active content as such', async () => {
    const cases: Array<[string, string | undefined, string]> = [
      ['mesh.glb', 'application/octet-stream', 'model/gltf-binary'],
      ['clip.wav', undefined, 'audio/wav'],
      ['movie.avi', 'application/x-www-form-urlencoded', 'video/x-msvideo'],
      ['notes.txt', undefined, 'text/plain; charset=utf-8'],
      ['scene.gltf', undefined, 'model/gltf+json'],
      ['data.json', undefined, 'application/json'],
      ['render', 'image/webp', 'image/webp'],
      ['page.html', 'text/html', 'application/octet-stream'],
      ['mystery', undefined, 'application/octet-stream'],
      ['weird.png', 'not a type', 'image/png'],
    ];
    for (const [name, type, expected] of cases) {
      const res = await upload(gw, await lease(), name, Buffer.from('x'), type ? { 'content-type': type } : {});
      assert.equal(res.status, 201, res.text);
      assert.equal(res.body.content_type, expected, name);
      const get = await fetch(res.body.url);
      assert.equal(get.headers.get('content-type'), expected, name);
      await get.arrayBuffer();
    }
    assert.equal(artifactContentType('Image/PNG; foo=bar', 'a.bin'), 'image/png');
    assert.equal(artifactContentType('text/csv; charset=ISO-8859-1', 'a.csv'), 'text/csv; charset=iso-8859-1');
    assert.equal(artifactContentType('image/svg+xml', 'a.svg'), 'application/octet-stream');
  });

  it('answers byte ranges: first bytes, suffix, open-ended, unsatisfiable (416), several (whole body)', async () => {
    const bytes = randomBytes(1000);
    const { url } = await uploaded(bytes);
    const etag = `"${sha256(bytes)}"`;
    const get = async (range: string, extra: Record<string, string> = {}) => {
      const res = await fetch(url, { headers: { range, ...extra } });
      return { res, body: Buffer.from(await res.arrayBuffer()) };
    };

    let { res, body } = await get('bytes=0-9');
    assert.equal(res.status, 206);
    assert.equal(res.headers.get('content-range'), 'bytes 0-9/1000');
    assert.equal(res.headers.get('content-length'), '10');
    assert.equal(res.headers.get('etag'), etag);
    assert.deepEqual(body, bytes.subarray(0, 10));

    ({ res, body } = await get('bytes=-100'));
    assert.equal(res.status, 206);
    assert.equal(res.headers.get('content-range'), 'bytes 900-999/1000');
    assert.deepEqual(body, bytes.subarray(900));

    ({ res, body } = await get('bytes=990-'));
    assert.equal(res.status, 206);
    assert.equal(res.headers.get('content-range'), 'bytes 990-999/1000');
    assert.deepEqual(body, bytes.subarray(990));

    ({ res, body } = await get('bytes=500-5000'));
    assert.equal(res.status, 206, 'an end past the size is clamped');
    assert.equal(res.headers.get('content-range'), 'bytes 500-999/1000');
    assert.deepEqual(body, bytes.subarray(500));

    ({ res, body } = await get('bytes=-5000'));
    assert.equal(res.status, 206, 'a suffix longer than the file is the whole file');
    assert.deepEqual(body, bytes);

    ({ res, body } = await get('bytes=1000-'));
    assert.equal(res.status, 416);
    assert.equal(res.headers.get('content-range'), 'bytes */1000');
    assert.deepEqual(JSON.parse(body.toString()).error, { code: 'range_not_satisfiable', message: 'the requested range is not satisfiable; the content has 1000 bytes', details: { size: 1000 } });
    assert.notEqual(res.headers.get('cache-control'), 'public, max-age=31536000, immutable');

    ({ res } = await get('bytes=-0'));
    assert.equal(res.status, 416);
    assert.equal(res.headers.get('content-range'), 'bytes */1000');

    ({ res, body } = await get('bytes=0-1, 5-6'));
    assert.equal(res.status, 200);
    assert.deepEqual(body, bytes);

    ({ res, body } = await get('bytes=9-3'));
    assert.equal(res.status, 200, 'an invalid range is ignored');
    assert.deepEqual(body, bytes);

    ({ res, body } = await get('bytes=0-9', { 'if-range': '"0000"' }));
    assert.equal(res.status, 200, 'If-Range naming another version gets the whole body');
    ({ res, body } = await get('bytes=0-9', { 'if-range': etag }));
    assert.equal(res.status, 206);

    const head = await fetch(url, { method: 'HEAD', headers: { range: 'bytes=10-19' } });
    assert.equal(head.status, 206);
    assert.equal(head.headers.get('content-length'), '10');
    assert.equal(head.headers.get('content-range'), 'bytes 10-19/1000');
  });

  it('answers If-None-Match with 304', async () => {
    const bytes = randomBytes(100);
    const { url } = await uploaded(bytes);
    const etag = `"${sha256(bytes)}"`;
    for (const inm of [etag, `W/${etag}`, `"other", ${etag}`, '*']) {
      const res = await fetch(url, { headers: { 'if-none-match': inm } });
      assert.equal(res.status, 304, inm);
      assert.equal(res.headers.get('etag'), etag);
      assert.equal((await res.arrayBuffer()).byteLength, 0);
    }
    const head = await fetch(url, { method: 'HEAD', headers: { 'if-none-match': etag } });
    assert.equal(head.status, 304);
    const other = await fetch(url, { headers: { 'if-none-match': '"abc"' } });
    assert.equal(other.status, 200);
    assert.deepEqual(Buffer.from(await other.arrayBuffer()), bytes);
  });

  it('refuses a wrong token, an unknown lease and an expired lease with 401', async () => {
    const l = await lease();
    const check = async (res: Awaited<ReturnType<typeof upload>>, what: string) => {
      assert.equal(res.status, 401, `${what}: ${res.text}`);
      assert.equal(errorCode(res), 'unauthorized');
      assert.match(res.headers.get('www-authenticate') ?? '', /^Bearer/);
    };
    await check(await upload(gw, { ...l, token: `${l.token}x` }, 'a.png', 'x'), 'wrong token');
    await check(await upload(gw, { ...l, token: (await lease()).token }, 'a.png', 'x'), "another lease's token");
    await check(await upload(gw, { ...l, lease_id: 'lse_doesnotexist' }, 'a.png', 'x'), 'unknown lease');
    await check(await upload(gw, { ...l, lease_id: `lse_${'x'.repeat(100)}` }, 'a.png', 'x'), 'malformed lease id');
    await check(await gw.request('POST', `/v1/leases/${l.lease_id}/artifacts?name=a.png`, { raw: 'x' }), 'no credential');

    const expiring = await lease(50);
    for (let i = 0; i < 200 && (await leases.get(expiring.lease_id)); i++) await new Promise((r) => setTimeout(r, 20));
    assert.equal(await leases.get(expiring.lease_id), null, 'the lease has expired');
    await check(await upload(gw, expiring, 'a.png', 'x'), 'expired lease');

    const done = await lease();
    await leases.delete(done.lease_id);
    await check(await upload(gw, done, 'a.png', 'x'), 'ended lease');
    assert.equal(await upload(gw, l, 'a.png', 'x').then((r) => r.status), 201, 'the right token still works');
  });

  it('refuses missing and unsafe file names with 400, and serves safe unusual ones', async () => {
    const l = await lease();
    for (const name of [null, '', '../x.png', 'a/b.png', 'a\\b.png', '..', '.hidden', 'a..b', 'a\u0000b', 'tab\there', 'x'.repeat(201), ' lead.png', 'bidi\u202egnp.exe', 'e\u0301.png']) {
      const res = await upload(gw, l, name, 'x');
      assert.equal(res.status, 400, `${JSON.stringify(name)}: ${res.text}`);
      assert.equal(errorCode(res), 'invalid_request');
    }
    const res = await gw.request('POST', `/v1/leases/${l.lease_id}/artifacts?name=a.png&name=b.png`, { raw: 'x', headers: { authorization: `Bearer ${l.token}` } });
    assert.equal(res.status, 400, 'two names');
    assert.equal(checkArtifactName('x'.repeat(200)), null);

    const name = 'Bild (1) é+ü=@,~_v2.png';
    const ok = await upload(gw, l, name, 'hello');
    assert.equal(ok.status, 201, ok.text);
    const get = await fetch(ok.body.url);
    assert.equal(get.status, 200);
    assert.equal(await get.text(), 'hello');
    assert.match(get.headers.get('content-disposition') ?? '', /filename\*=UTF-8''Bild%20%281%29%20/);
  });

  it('refuses an upload over ARTIFACT_MAX_BYTES with 413 and keeps nothing of it', async () => {
    const root = path.join(smallDir, 'artifacts');
    const l = await lease();
    const ok = await upload(small, l, 'fits.bin', Buffer.alloc(1024, 1));
    assert.equal(ok.status, 201, 'exactly the limit is accepted');
    const before = await filesUnder(root);
    assert.equal(before.length, 1, 'one file: the bytes and their record');

    // Declared too large: refused before reading.
    const declared = await upload(small, l, 'big.bin', Buffer.alloc(1025, 2));
    assert.equal(declared.status, 413, declared.text);
    assert.equal(errorCode(declared), 'payload_too_large');

    // Chunked, no Content-Length: refused once the limit is passed.
    const streamed = await new Promise<{ status: number; body: string }>((resolve, reject) => {
      const req = http.request(`${small.url}/v1/leases/${l.lease_id}/artifacts?name=big.bin`, {
        method: 'POST',
        headers: { authorization: `Bearer ${l.token}`, 'content-type': 'application/octet-stream' },
      });
      req.on('response', (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (body += c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
        res.on('error', reject);
      });
      req.on('error', reject);
      for (let i = 0; i < 3; i++) req.write(Buffer.alloc(600, i));
      req.end();
    });
    assert.equal(streamed.status, 413, streamed.body);
    assert.equal(JSON.parse(streamed.body).error.code, 'payload_too_large');

    assert.deepEqual((await filesUnder(root)).sort(), before.sort(), 'no partial file, no metadata, nothing served');
  });

  it('streams a large upload to disk: 50 MB pass while the process grows by far less', async function () {
    this.timeout(120_000);
    const l = await lease();
    const blocks = Array.from({ length: 7 }, () => randomBytes(64 * 1024));
    const total = 50 * 1024 * 1024;
    const send = (size: number, onChunk: (sent: number) => void) =>
      new Promise<{ status: number; body: any }>((resolve, reject) => {
        const req = http.request(`${gw.url}/v1/leases/${l.lease_id}/artifacts?name=big.bin`, {
          method: 'POST',
          headers: { authorization: `Bearer ${l.token}`, 'content-length': String(size) },
        });
        req.on('response', (res) => {
          let text = '';
          res.setEncoding('utf8');
          res.on('data', (c: string) => (text += c));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, body: JSON.parse(text) }));
        });
        async function* generate() {
          let sent = 0;
          for (let i = 0; sent < size; i++) {
            const block = blocks[i % blocks.length].subarray(0, Math.min(64 * 1024, size - sent));
            sent += block.length;
            onChunk(sent);
            yield block;
          }
        }
        pipeline(Readable.from(generate()), req).catch(reject);
      });

    // Warm up the code path, then measure from a collected heap.
    await send(1024 * 1024, () => {});
    forceGc();
    const baseline = process.memoryUsage().rss;
    let peak = baseline;
    const hash = createHash('sha256');
    for (let sent = 0, i = 0; sent < total; i++) {
      const block = blocks[i % blocks.length].subarray(0, Math.min(64 * 1024, total - sent));
      hash.update(block);
      sent += block.length;
    }
    const res = await send(total, (sent) => {
      // Collect garbage now and then: what stays is what the upload holds on to.
      if (sent % (4 * 1024 * 1024) === 0) forceGc();
      peak = Math.max(peak, process.memoryUsage().rss);
    });
    forceGc();
    peak = Math.max(peak, process.memoryUsage().rss);
    assert.equal(res.status, 201, JSON.stringify(res.body));
    assert.equal(res.body.size, total);
    assert.equal(res.body.sha256, hash.digest('hex'));
    const growthMb = (peak - baseline) / (1024 * 1024);
    if (process.env.SY_TEST_VERBOSE) console.log(`RSS growth during the 50 MB upload: ${growthMb.toFixed(1)} MB`);
    assert.ok(growthMb < 30, `RSS grew by ${growthMb.toFixed(1)} MB during a 50 MB upload`);

    // And it downloads whole, streamed.
    const get = await fetch(res.body.url);
    assert.equal(get.headers.get('content-length'), String(total));
    const down = createHash('sha256');
    let size = 0;
    for await (const chunk of get.body as unknown as AsyncIterable<Uint8Array>) {
      down.update(chunk);
      size += chunk.length;
    }
    assert.equal(size, total);
    assert.equal(down.digest('hex'), res.body.sha256);
  });

  it('drops an interrupted upload without leaving a partial file', async () => {
    const l = await lease();
    const root = path.join(dataDir, 'artifacts');
    const before = new Set(await filesUnder(root));
    const added = async () => (await filesUnder(root)).filter((f) => !before.has(f));
    const until = async (what: string, cond: () => Promise<boolean>) => {
      for (let i = 0; i < 500 && !(await cond()); i++) await new Promise((r) => setTimeout(r, 10));
      assert.ok(await cond(), what);
    };
    const req = http.request(`${gw.url}/v1/leases/${l.lease_id}/artifacts?name=cut.bin`, {
      method: 'POST',
      headers: { authorization: `Bearer ${l.token}`, 'content-length': String(10 * 1024 * 1024) },
    });
    const closed = new Promise<void>((resolve) => req.on('close', () => resolve()));
    req.on('error', () => {});
    req.write(randomBytes(256 * 1024));
    // Cut the connection once the upload is under way (its partial file exists), then wait for
    // the server to notice and clean up. These are waits, not timing assertions.
    await until('the upload started', async () => (await added()).length > 0);
    req.destroy();
    await closed;
    await until('the partial file is deleted', async () => (await added()).length === 0);
  });

  it('404s an expired artifact at once and the sweeper deletes it', async () => {
    const store = gw.services.artifacts as FsArtifactStore;
    const sweeper = new ArtifactSweeper({ store, log: gw.log });
    const a = await uploaded(randomBytes(50), 'a.png');
    const b = await uploaded(randomBytes(50), 'b.png');
    const keep = await uploaded(randomBytes(50), 'keep.png');
    const files = (url: string) => {
      const id = idOf(url);
      return [path.join(store.root, id.slice(0, 2), `${id}.art`)];
    };
    const exists = (f: string) => fsp.access(f).then(() => true, () => false);

    // Past its expires_at: 404 even before any sweep. The record is the file's trailer: JSON,
    // its length (uint32 BE), a 4-byte magic.
    const [fileA] = files(a.url);
    const whole = await fsp.readFile(fileA);
    const jsonLen = whole.readUInt32BE(whole.length - 8);
    const meta = JSON.parse(whole.subarray(whole.length - 8 - jsonLen, whole.length - 8).toString());
    const json = Buffer.from(JSON.stringify({ ...meta, expires_at: new Date(Date.now() - 1000).toISOString() }));
    const tail = Buffer.from(whole.subarray(whole.length - 8));
    tail.writeUInt32BE(json.length, 0);
    await fsp.writeFile(fileA, Buffer.concat([whole.subarray(0, meta.size), json, tail]));
    const gone = await fetch(a.url);
    assert.equal(gone.status, 404);
    assert.equal(((await gone.json()) as any).error.code, 'not_found');

    assert.ok((await sweeper.sweep()) >= 1);
    for (const f of files(a.url)) assert.equal(await exists(f), false, `${f} deleted`);
    for (const f of files(b.url)) assert.equal(await exists(f), true, 'unexpired artifacts stay');

    // Thirty days on (the default retention), the others expire too.
    assert.ok((await sweeper.sweep(new Date(Date.now() + 30 * 86400 * 1000 + 60_000))) >= 2);
    for (const f of [...files(b.url), ...files(keep.url)]) assert.equal(await exists(f), false);
    assert.equal((await fetch(b.url)).status, 404);
    await sweeper.stop();
  });

  it('gives unguessable URLs: long random ids, the name is part of the URL', async () => {
    const bytes = Buffer.from('same bytes');
    const urls = await Promise.all(Array.from({ length: 5 }, () => uploaded(bytes).then((r) => r.url)));
    const ids = urls.map(idOf);
    assert.equal(new Set(ids).size, ids.length);
    for (const id of ids) assert.match(id, /^[a-z2-7]{32}$/);
    const url = new URL(urls[0]);
    for (const path of [
      url.pathname.replace(/\/[^/]+$/, '/other.png'),
      url.pathname.replace(ids[0], ids[0].slice(0, 31) + (ids[0][31] === 'a' ? 'b' : 'a')),
      `/v1/artifacts/${'a'.repeat(32)}/out.png`,
      '/v1/artifacts/short/out.png',
      `/v1/artifacts/${ids[0]}/..%2F..%2Fetc%2Fpasswd`,
    ]) {
      const res = await gw.request('GET', path);
      assert.equal(res.status, 404, path);
      assert.equal(errorCode(res), 'not_found');
    }
  });

  it('is documented in the OpenAPI document', async () => {
    const doc = (await gw.request('GET', '/v1/openapi.json')).body;
    const result = await new Validator().validate(structuredClone(doc));
    assert.equal(result.valid, true, JSON.stringify(result.errors, null, 2));
    const upload = doc.paths['/v1/leases/{lease_id}/artifacts'].post;
    assert.deepEqual(upload.security, [{ uploadToken: [] }]);
    assert.ok(upload.requestBody.content['*/*']);
    assert.ok(upload.responses['413']);
    const download = doc.paths['/v1/artifacts/{artifact_id}/{name}'].get;
    assert.deepEqual(download.security, []);
    assert.ok(download.responses['206'] && download.responses['416'] && download.responses['304']);
  });

  it('a store stands on its own: one instance serves what another wrote', async () => {
    const other = new FsArtifactStore({ root: path.join(dataDir, 'artifacts') });
    const { url, sha256: digest } = await uploaded(Buffer.from('shared'));
    const meta = await other.get(idOf(url));
    assert.equal(meta?.sha256, digest);
    const chunks: Buffer[] = [];
    for await (const c of await other.open(idOf(url), { start: 1, end: 3 })) chunks.push(c as Buffer);
    assert.equal(Buffer.concat(chunks).toString(), 'har');
  });
});

describe('FsArtifactStore directories', function () {
  it('makes an artifact directory again when it was removed behind its back (it remembers those it made)', async () => {
    const root = await fsp.mkdtemp(path.join(os.tmpdir(), 'artifacts-dirs-'));
    try {
      const store = new FsArtifactStore({ root });
      await store.init();
      const put = (text: string) =>
        store.put(Readable.from([Buffer.from(text)]), { name: 'a.txt', accountId: 'acct_dirs', contentType: 'text/plain', retentionSeconds: 60, maxBytes: 1024 });
      // Every directory goes after each upload, as an operator clearing the artifacts by
      // hand would do, until an upload lands in a directory the store made before (a birthday
      // draw over 1,024 directories: a few dozen uploads).
      const made = new Set<string>();
      let remade = 0;
      for (let i = 0; i < 2000 && remade < 2; i++) {
        const meta = await put(`upload ${i}`);
        if (made.has(meta.id.slice(0, 2))) remade++;
        made.add(meta.id.slice(0, 2));
        assert.equal((await store.get(meta.id))?.sha256, sha256(`upload ${i}`));
        for (const e of await fsp.readdir(root)) await fsp.rm(path.join(root, e), { recursive: true });
      }
      assert.equal(remade, 2);
    } finally {
      await fsp.rm(root, { recursive: true, force: true });
    }
  });
});
