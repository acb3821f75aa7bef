import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { Readable } from 'node:stream';
import type { ArtifactStore, ByteRange, PutArtifact } from '../models/artifact-store.js';
import { newArtifactId } from '../models/ids.js';
import { S3ArtifactStore } from '../models/s3-artifact-store.js';
import { artifactTargets, s3StandIn } from './helpers/artifact-store-targets.js';
import { freePort } from './helpers/ports.js';

const sha256 = (b: Buffer): string => createHash('sha256').update(b).digest('hex');

async function read(store: ArtifactStore, id: string, range?: ByteRange): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const c of await store.open(id, range)) chunks.push(c as Buffer);
  return Buffer.concat(chunks);
}

/** `bytes` in chunks of `size`, as a request body arrives. */
async function* chunked(bytes: Buffer, size = 64 * 1024): AsyncGenerator<Uint8Array> {
  for (let i = 0; i < bytes.length; i += size) yield bytes.subarray(i, i + size);
}

const opts = (over: Partial<PutArtifact> = {}): PutArtifact => ({
  name: 'out.png',
  contentType: 'image/png',
  runId: 'run_contract',
  leaseId: 'lse_contract',
  accountId: 'acct_contract',
  maxBytes: 64 * 1024 * 1024,
  retentionSeconds: 3600,
  ...over,
});

/**
 * The ArtifactStore contract (models/artifact-store.ts), run against every store: the filesystem
 * one and the S3 one, the latter on s3rver standing in for Amazon S3, MinIO or R2.
 */
describe('artifact store contract', function () {
  this.timeout(60_000);
  for (const target of artifactTargets) {
    describe(target.name, function () {
      let t: Awaited<ReturnType<typeof target.open>>;
      before(() => target.before());
      after(() => target.after());
      beforeEach(async () => (t = await target.open()));
      afterEach(() => t.teardown());

      it('stores the bytes it was given, with their record, and serves them whole or by range', async () => {
        const bytes = randomBytes(300_000);
        const before = Date.now();
        const meta = await t.store.put(chunked(bytes), opts());
        const after = Date.now();
        assert.match(meta.id, /^[a-z2-7]{32}$/);
        assert.deepEqual(
          { name: meta.name, run: meta.run_id, lease: meta.lease_id, account: meta.account_id, size: meta.size, sha: meta.sha256, type: meta.content_type },
          { name: 'out.png', run: 'run_contract', lease: 'lse_contract', account: 'acct_contract', size: bytes.length, sha: sha256(bytes), type: 'image/png' },
        );
        const created = Date.parse(meta.created_at);
        assert.ok(created >= before - 1 && created <= after + 1);
        const expires = Date.parse(meta.expires_at);
        assert.ok(expires >= before + 3600_000 - 1 && expires <= after + 3600_000 + 1, 'expires after the retention');
        assert.deepEqual(await t.store.get(meta.id), meta);
        assert.ok((await read(t.store, meta.id)).equals(bytes));
        assert.ok((await read(t.store, meta.id, { start: 1000, end: 1999 })).equals(bytes.subarray(1000, 2000)));
        // A range running past the end stops at the last byte.
        assert.ok((await read(t.store, meta.id, { start: bytes.length - 10, end: bytes.length + 100 })).equals(bytes.subarray(-10)));
      });

      it('streams a body of several multipart parts (12 MiB) and hashes every byte', async () => {
        const bytes = randomBytes(12 * 1024 * 1024 + 7);
        const meta = await t.store.put(chunked(bytes, 1024 * 1024), opts({ name: 'big.bin', contentType: 'application/octet-stream' }));
        assert.equal(meta.size, bytes.length);
        assert.equal(meta.sha256, sha256(bytes));
        assert.equal(sha256(await read(t.store, meta.id)), sha256(bytes));
        assert.ok((await read(t.store, meta.id, { start: 5 * 1024 * 1024 - 3, end: 5 * 1024 * 1024 + 2 })).equals(bytes.subarray(5 * 1024 * 1024 - 3, 5 * 1024 * 1024 + 3)), 'a range across a part boundary');
      });

      it('stores an empty file', async () => {
        const meta = await t.store.put(chunked(Buffer.alloc(0)), opts({ name: 'empty.txt', contentType: 'text/plain; charset=utf-8' }));
        assert.equal(meta.size, 0);
        assert.equal(meta.sha256, sha256(Buffer.alloc(0)));
        assert.equal((await t.store.get(meta.id))?.size, 0);
        assert.equal((await read(t.store, meta.id)).length, 0);
      });

      it('knows nothing of an unknown or malformed id', async () => {
        for (const id of [newArtifactId(), 'not-an-id', '../../etc/passwd', 'A'.repeat(32)]) {
          assert.equal(await t.store.get(id), null);
          await assert.rejects(t.store.open(id), { code: 'not_found' });
          await t.store.delete(id);
        }
      });

      it('refuses an upload past maxBytes with payload_too_large and keeps nothing of it', async () => {
        const bytes = randomBytes(11 * 1024 * 1024);
        // Past the limit only after two multipart parts went up: the upload must be aborted.
        await assert.rejects(t.store.put(chunked(bytes, 1024 * 1024), opts({ maxBytes: 10 * 1024 * 1024 + 5 })), { code: 'payload_too_large' });
        assert.deepEqual(await t.leftovers(), []);
      });

      it('keeps nothing of an upload whose body fails mid-way, and reports the failure', async () => {
        async function* cut(): AsyncGenerator<Uint8Array> {
          yield randomBytes(6 * 1024 * 1024);
          throw new Error('the worker went away');
        }
        await assert.rejects(t.store.put(cut(), opts()), /the worker went away/);
        assert.deepEqual(await t.leftovers(), []);
      });

      it('serves what another instance over the same storage uploaded, and a delete there is seen here', async () => {
        const bytes = Buffer.from('shared between gateways');
        const meta = await t.store.put(chunked(bytes), opts());
        const peer = t.peer();
        assert.deepEqual(await peer.get(meta.id), meta);
        assert.equal((await read(peer, meta.id, { start: 7, end: 13 })).toString(), 'between');
        await peer.delete(meta.id);
        assert.equal(await t.store.get(meta.id), null);
        await assert.rejects(t.store.open(meta.id), { code: 'not_found' });
        assert.deepEqual(await t.leftovers(), []);
      });

      it('serves more downloads at once than a connection pool holds (200 held open), and frees what a download held when it is dropped', async () => {
        // A download read slowly holds its connection to the storage for as long as it lasts:
        // those held must not stop others starting, nor the record reads every request makes
        // (the AWS SDK's default pool is 50 sockets, past which requests wait for a free one).
        const bytes = randomBytes(100_000);
        const meta = await t.store.put(chunked(bytes), opts());
        const held = await Promise.all(Array.from({ length: 200 }, () => t.store.open(meta.id)));
        assert.deepEqual(await t.store.get(meta.id), meta);
        assert.ok((await read(t.store, meta.id, { start: 0, end: 99 })).equals(bytes.subarray(0, 100)));
        // A caller gone mid-download destroys its stream (Koa does): the connection goes back.
        for (const stream of held) stream.destroy();
        for (let round = 0; round < 3; round++) {
          const again = await Promise.all(Array.from({ length: 200 }, () => t.store.open(meta.id)));
          for (const stream of again) stream.destroy();
        }
        assert.ok((await read(t.store, meta.id)).equals(bytes));
      });

      it('hands a run upload\'s record over once, and never an account upload\'s', async () => {
        const run = await t.store.put(chunked(Buffer.from('run')), opts());
        const own = await t.store.put(chunked(Buffer.from('own')), opts({ runId: undefined, leaseId: undefined }));
        assert.equal(own.run_id, null);
        assert.deepEqual(t.store.takeUploaded?.(run.id), run);
        assert.equal(t.store.takeUploaded?.(run.id), null);
        assert.equal(t.store.takeUploaded?.(own.id), null);
      });

      it('sweeps expired artifacts, and only those, and counts them', async () => {
        const short = await t.store.put(chunked(Buffer.from('short')), opts({ retentionSeconds: 1 }));
        const long = await t.store.put(chunked(Buffer.from('long')), opts({ retentionSeconds: 3600 }));
        assert.equal(await t.store.deleteExpired(new Date()), 0, 'nothing has expired yet');
        const later = new Date(Date.parse(short.expires_at) + 1);
        assert.equal(await t.store.deleteExpired(later), 1);
        assert.equal(await t.store.get(short.id), null);
        await assert.rejects(t.store.open(short.id), { code: 'not_found' });
        assert.deepEqual((await t.store.get(long.id))?.sha256, long.sha256);
        assert.equal(await t.store.deleteExpired(later), 0, 'a second sweep finds nothing more');
        assert.equal(await t.store.deleteExpired(new Date(Date.parse(long.expires_at) + 1)), 1);
        assert.deepEqual(await t.leftovers(), []);
      });
    });
  }

  it('the S3 store answers 503 unavailable (never a 500) while the bucket cannot be reached, and refuses to start', async () => {
    const closed = await freePort();
    const store = new S3ArtifactStore({ ...s3StandIn.storeOptions('down/'), endpoint: `http://127.0.0.1:${closed}` });
    try {
      await assert.rejects(store.init(), /cannot be read/);
      await assert.rejects(store.put(chunked(Buffer.from('x')), opts()), { code: 'unavailable', status: 503 });
      await assert.rejects(store.get(newArtifactId()), { code: 'unavailable' });
      await assert.rejects(store.open(newArtifactId()), { code: 'unavailable' });
      await assert.rejects(store.delete(newArtifactId()), { code: 'unavailable' });
    } finally {
      store.client.destroy();
    }
  });

  it('the S3 store asks the server to abort a multipart upload that went past maxBytes', async () => {
    // s3rver answers AbortMultipartUpload 405 (it keeps the parts, in no object), so that the
    // store sends the abort, which S3, MinIO and R2 honour by freeing the parts, is what is shown.
    const target = artifactTargets.find((x) => x.name.startsWith('s3'))!;
    await target.before();
    try {
      const t = await target.open();
      try {
        const seen = s3StandIn.requests.length;
        await assert.rejects(t.store.put(chunked(randomBytes(11 * 1024 * 1024), 1024 * 1024), opts({ maxBytes: 10 * 1024 * 1024 + 5 })), { code: 'payload_too_large' });
        const sent = s3StandIn.requests.slice(seen);
        const parts = sent.filter((r) => /^PUT .*[?&]partNumber=/.test(r));
        assert.ok(parts.length >= 1, `parts were uploaded: ${sent.join(', ')}`);
        const uploadId = /uploadId=([^&]+)/.exec(parts[0])![1];
        assert.ok(sent.some((r) => r.startsWith('DELETE ') && r.includes(`uploadId=${uploadId}`)), `AbortMultipartUpload was sent: ${sent.join(', ')}`);
        assert.ok(!sent.some((r) => r.startsWith('POST ') && r.includes(`uploadId=${uploadId}`) && !r.includes('uploads')), 'never completed');
      } finally {
        await t.teardown();
      }
    } finally {
      await target.after();
    }
  });
});
