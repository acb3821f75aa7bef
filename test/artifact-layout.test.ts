import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import fsp from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { FsArtifactStore, newArtifactId } from '../models/fs-artifact-store.js';
import { TestGateway, cleanupPrefix, uniquePrefix } from './helpers/harness.js';

const sha256 = (data: Buffer | string): string => createHash('sha256').update(data).digest('hex');

async function readAll(stream: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const c of stream) chunks.push(c as Buffer);
  return Buffer.concat(chunks);
}

const put = (store: FsArtifactStore, bytes: Buffer, name = 'out.png') =>
  store.put(Readable.from([bytes]), { name, runId: 'run_layout', leaseId: 'lse_layout', accountId: 'acct_layout', contentType: 'image/png', retentionSeconds: 60, maxBytes: 1 << 20 });

describe('artifact store layout: one file per artifact, the old layout still served', function () {
  let root: string;
  beforeEach(async () => {
    root = await fsp.mkdtemp(path.join(os.tmpdir(), 'sy-artifact-layout-'));
  });
  afterEach(async () => {
    await fsp.rm(root, { recursive: true, force: true });
  });

  /** An artifact as the store wrote it before one file per artifact: bytes and record apart. */
  async function writeOldLayout(bytes: Buffer, expiresInMs = 60_000): Promise<{ id: string; name: string }> {
    const id = newArtifactId();
    const name = 'old.png';
    const dir = path.join(root, id.slice(0, 2));
    await fsp.mkdir(dir, { recursive: true });
    const now = Date.now();
    const meta = {
      id, name, run_id: 'run_old', lease_id: 'lse_old', account_id: 'acct_old', size: bytes.length, sha256: sha256(bytes),
      content_type: 'image/png', created_at: new Date(now).toISOString(), expires_at: new Date(now + expiresInMs).toISOString(),
    };
    await fsp.writeFile(path.join(dir, `${id}.data`), bytes);
    await fsp.writeFile(path.join(dir, `${id}.json`), JSON.stringify(meta));
    return { id, name };
  }

  it('writes one file per artifact, holding the bytes and the record; ranges see only the bytes', async () => {
    const store = new FsArtifactStore({ root });
    await store.init();
    const bytes = randomBytes(300);
    const meta = await put(store, bytes);
    const dir = path.join(root, meta.id.slice(0, 2));
    assert.deepEqual(await fsp.readdir(dir), [`${meta.id}.art`]);
    assert.deepEqual(await fsp.readdir(root), [meta.id.slice(0, 2)], 'written in place: no temporary file or directory');
    assert.deepEqual(await store.get(meta.id), meta);
    assert.deepEqual(await readAll(await store.open(meta.id)), bytes);
    assert.deepEqual(await readAll(await store.open(meta.id, { start: 290, end: 299 })), bytes.subarray(290));
    const empty = await put(store, Buffer.alloc(0), 'empty.txt');
    assert.equal((await store.get(empty.id))?.size, 0);
    assert.equal((await readAll(await store.open(empty.id))).length, 0);
  });

  it('an artifact uploaded on one instance is read, served and swept by another sharing the directory', async () => {
    const a = new FsArtifactStore({ root });
    const b = new FsArtifactStore({ root });
    await a.init();
    const bytes = randomBytes(64);
    const meta = await put(a, bytes);
    // Only the uploading instance holds the record in memory for its settlement.
    assert.equal(b.takeUploaded(meta.id), null);
    assert.deepEqual(await b.get(meta.id), meta);
    assert.deepEqual(await readAll(await b.open(meta.id, { start: 4, end: 9 })), bytes.subarray(4, 10));
    assert.deepEqual(a.takeUploaded(meta.id), meta);
    assert.equal(a.takeUploaded(meta.id), null, 'handed over once');
    assert.equal(await b.deleteExpired(new Date(Date.now() + 120_000)), 1);
    assert.equal(await a.get(meta.id), null);
    await assert.rejects(a.open(meta.id), { code: 'not_found' });
  });

  it('reads, serves and sweeps an artifact of the old layout (.data and .json)', async () => {
    const store = new FsArtifactStore({ root });
    await store.init();
    const bytes = randomBytes(100);
    const { id } = await writeOldLayout(bytes);
    assert.equal((await store.get(id))?.sha256, sha256(bytes));
    assert.deepEqual(await readAll(await store.open(id, { start: 10, end: 19 })), bytes.subarray(10, 20));
    assert.equal(await store.deleteExpired(new Date()), 0);
    assert.equal(await store.deleteExpired(new Date(Date.now() + 120_000)), 1);
    assert.deepEqual(await fsp.readdir(path.join(root, id.slice(0, 2))), []);
  });

  it('a gateway serves an old-layout artifact over HTTP: bytes, ETag, Range', async () => {
    const prefix = uniquePrefix('artifact-layout');
    const dataDir = root;
    root = path.join(dataDir, 'artifacts');
    const bytes = randomBytes(200);
    const { id, name } = await writeOldLayout(bytes);
    root = dataDir;
    const gw = await new TestGateway(prefix, { DATA_DIR: dataDir }).start();
    try {
      const url = `${gw.url}/v1/artifacts/${id}/${name}`;
      const res = await fetch(url);
      assert.equal(res.status, 200);
      assert.equal(res.headers.get('etag'), `"${sha256(bytes)}"`);
      assert.equal(res.headers.get('content-type'), 'image/png');
      assert.deepEqual(Buffer.from(await res.arrayBuffer()), bytes);
      const part = await fetch(url, { headers: { range: 'bytes=5-9' } });
      assert.equal(part.status, 206);
      assert.deepEqual(Buffer.from(await part.arrayBuffer()), bytes.subarray(5, 10));
    } finally {
      await gw.stop();
      await cleanupPrefix(prefix);
    }
  });
});
