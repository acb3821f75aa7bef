import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import fsp from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { ArtifactMeta } from '../models/artifact-store.js';
import { FsArtifactStore, newArtifactId } from '../models/fs-artifact-store.js';
import { TestGateway, cleanupPrefix, uniquePrefix, until } from './helpers/harness.js';

const DAY_MS = 24 * 3600 * 1000;

/** A body whose first part arrives at once and whose end waits for the test: an upload held half-written. */
function heldBody(first: Buffer) {
  let release!: (end: Buffer | Error) => void;
  const gate = new Promise<Buffer | Error>((resolve) => (release = resolve));
  async function* body(): AsyncGenerator<Uint8Array> {
    yield first;
    const end = await gate;
    if (end instanceof Error) throw end;
    yield end;
  }
  return { body: body(), finish: (end: Buffer) => release(end), fail: (err: Error) => release(err) };
}

/** The record of an artifact file as the store writes it: JSON, its length (uint32 BE), `SYA1`. */
function trailer(meta: ArtifactMeta): Buffer {
  const json = Buffer.from(JSON.stringify(meta));
  const tail = Buffer.alloc(8);
  tail.writeUInt32BE(json.length, 0);
  tail.write('SYA1', 4, 'latin1');
  return Buffer.concat([json, tail]);
}

async function artFiles(root: string): Promise<string[]> {
  const entries = await fsp.readdir(root, { recursive: true }).catch(() => [] as string[]);
  return entries.filter((f) => f.endsWith('.art')).map((f) => path.join(root, f));
}

const opts = { name: 'held.bin', runId: 'run_inplace', leaseId: 'lse_inplace', accountId: 'acct_inplace', contentType: 'application/octet-stream', retentionSeconds: 3600, maxBytes: 1 << 22 };

/**
 * Uploads are written at their final path, the record last: a file is an artifact exactly when
 * its record is complete. Readers on any gateway sharing the directory must never serve a
 * file still being written, a failed upload leaves nothing, and a crashed one is swept.
 */
describe('artifact store: uploads written in place', function () {
  let dataDir: string;
  let root: string;
  beforeEach(async () => {
    dataDir = await fsp.mkdtemp(path.join(os.tmpdir(), 'sy-artifact-inplace-'));
    root = path.join(dataDir, 'artifacts');
  });
  afterEach(async () => {
    await fsp.rm(dataDir, { recursive: true, force: true });
  });

  it('an upload under way, on another gateway sharing the directory, is not found by any reader until its record is written', async () => {
    const prefix = uniquePrefix('artifact-inplace');
    const gw = await new TestGateway(prefix, { DATA_DIR: dataDir }).start();
    try {
      const uploader = new FsArtifactStore({ root });
      // The first part ends like a record, of another id: the uploader cannot know its own
      // until the upload is done, so no upload can pass for complete.
      const bytes = randomBytes(100 * 1024);
      const forged = trailer({ ...opts, id: newArtifactId(), run_id: null, lease_id: null, account_id: 'acct_inplace', size: bytes.length, sha256: '0'.repeat(64), content_type: 'text/html', created_at: new Date().toISOString(), expires_at: new Date(Date.now() + 3600_000).toISOString() });
      const first = Buffer.concat([bytes, forged]);
      const held = heldBody(first);
      const uploading = uploader.put(held.body, opts);
      const [file] = await until('the upload is on disk at its final path', async () => {
        const files = await artFiles(root);
        return files.length === 1 && (await fsp.stat(files[0])).size >= first.length && files;
      });
      const id = path.basename(file, '.art');
      assert.deepEqual(await fsp.readdir(root), [id.slice(0, 2)], 'no temporary file');

      const store = gw.services.artifacts as FsArtifactStore;
      for (const reader of [store, uploader]) {
        assert.equal(await reader.get(id), null);
        await assert.rejects(reader.open(id), { code: 'not_found' });
        await assert.rejects(reader.open(id, { start: 0, end: 9 }), { code: 'not_found' });
      }
      const url = `${gw.url}/v1/artifacts/${id}/${opts.name}`;
      assert.equal((await fetch(url)).status, 404);
      assert.equal((await fetch(url, { method: 'HEAD' })).status, 404);
      assert.equal((await fetch(url, { headers: { range: 'bytes=0-9' } })).status, 404);
      // The expiry sweep leaves a young upload alone.
      assert.equal(await store.deleteExpired(new Date(Date.now() + 2 * 3600_000)), 0);
      assert.deepEqual(await artFiles(root), [file]);

      const end = randomBytes(10);
      held.finish(end);
      const meta = await uploading;
      assert.equal(meta.id, id);
      const whole = Buffer.concat([first, end]);
      assert.equal(meta.sha256, createHash('sha256').update(whole).digest('hex'));
      assert.deepEqual(await store.get(id), meta);
      const res = await fetch(url);
      assert.equal(res.status, 200);
      assert.deepEqual(Buffer.from(await res.arrayBuffer()), whole);
    } finally {
      await gw.stop();
      await cleanupPrefix(prefix);
    }
  });

  it('an upload that fails half-way leaves no file', async () => {
    const store = new FsArtifactStore({ root });
    await store.init();
    const held = heldBody(randomBytes(100 * 1024));
    const uploading = store.put(held.body, opts);
    await until('the upload is on disk', async () => (await artFiles(root)).length === 1);
    held.fail(new Error('the worker went away'));
    await assert.rejects(uploading, /the worker went away/);
    assert.deepEqual(await artFiles(root), []);
  });

  it('a file without its record (a crashed upload) is not found, and swept once abandoned', async () => {
    const store = new FsArtifactStore({ root });
    await store.init();
    const kept = await store.put((async function* () { yield randomBytes(500); })(), { ...opts, retentionSeconds: 7 * 86400 });
    const cut = await store.put((async function* () { yield randomBytes(500); })(), opts);
    // What a gateway killed mid-upload leaves: the bytes, part of them, no record.
    const cutFile = path.join(root, cut.id.slice(0, 2), `${cut.id}.art`);
    await fsp.truncate(cutFile, 300);
    assert.equal(await store.get(cut.id), null);
    await assert.rejects(store.open(cut.id), { code: 'not_found' });

    assert.equal(await store.deleteExpired(new Date()), 0);
    assert.equal((await artFiles(root)).length, 2, 'it may still be under way');
    // A day on (the sweep's `now` is the store's clock), the upload is abandoned; the artifact
    // beside it, kept for a week, stays.
    assert.equal(await store.deleteExpired(new Date(Date.now() + DAY_MS + 60_000)), 0);
    assert.deepEqual(await artFiles(root), [path.join(root, kept.id.slice(0, 2), `${kept.id}.art`)]);
    assert.deepEqual(await store.get(kept.id), kept);
  });
});
