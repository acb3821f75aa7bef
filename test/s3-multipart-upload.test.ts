import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { GetObjectCommand, ListObjectsV2Command, S3Client } from '@aws-sdk/client-s3';
import { PART_BYTES, S3MultipartUploader } from '../models/s3-multipart-upload.js';
import { S3StandIn } from './helpers/s3-stand-in.js';

const MiB = 1024 * 1024;
const sha256 = (b: Uint8Array): string => createHash('sha256').update(b).digest('hex');

/** `bytes` in chunks of `size`, as a request body arrives. */
async function* chunked(bytes: Buffer, size = 64 * 1024): AsyncGenerator<Uint8Array> {
  for (let i = 0; i < bytes.length; i += size) yield bytes.subarray(i, i + size);
}

/**
 * The S3 store's uploader (models/s3-multipart-upload.ts) on s3rver: what the store relies on
 * is that an object appears whole or not at all. s3rver answers AbortMultipartUpload with 405
 * (it keeps the parts, in no object), so what is shown is that the abort is sent, which S3,
 * MinIO and R2 honour by freeing the parts, and that no object is left under the key.
 */
describe('S3MultipartUploader (s3rver standing in for S3)', function () {
  this.timeout(60_000);
  const s3 = new S3StandIn();
  let client: S3Client;
  let prefix: string;

  before(async () => {
    await s3.start();
    const o = s3.storeOptions('');
    client = new S3Client({ region: o.region, endpoint: o.endpoint, forcePathStyle: true, credentials: o.credentials, requestChecksumCalculation: 'WHEN_REQUIRED', responseChecksumValidation: 'WHEN_REQUIRED' });
  });
  after(async () => {
    client?.destroy();
    await s3.stop();
  });
  beforeEach(() => (prefix = `mpu-${randomBytes(6).toString('hex')}/`));

  const target = (name: string) => ({ Bucket: s3.bucket, Key: `${prefix}${name}`, ContentType: 'application/octet-stream' });

  async function objects(): Promise<string[]> {
    const res = await client.send(new ListObjectsV2Command({ Bucket: s3.bucket, Prefix: prefix }));
    return (res.Contents ?? []).map((o) => o.Key!.slice(prefix.length));
  }

  async function read(name: string): Promise<Buffer> {
    const res = await client.send(new GetObjectCommand({ Bucket: s3.bucket, Key: `${prefix}${name}` }));
    return Buffer.from(await res.Body!.transformToByteArray());
  }

  /** The requests s3rver received for this test's keys while `fn` ran. */
  async function requestsDuring(fn: () => Promise<unknown>): Promise<string[]> {
    const seen = s3.requests.length;
    await fn();
    return s3.requests.slice(seen).filter((r) => r.includes(`/${prefix}`));
  }

  it('stores a body of several parts byte for byte, and one that fits a part as one PutObject', async () => {
    const uploader = new S3MultipartUploader(client);
    const big = randomBytes(2 * PART_BYTES + 12_345);
    const sent = await requestsDuring(() => uploader.upload(target('big.bin'), chunked(big, MiB + 1)));
    assert.equal(sent.filter((r) => /^PUT .*[?&]partNumber=/.test(r)).length, 3, sent.join(', '));
    assert.equal(sha256(await read('big.bin')), sha256(big));

    // Exactly one part's worth: still one request, no multipart upload.
    const one = randomBytes(PART_BYTES);
    const single = await requestsDuring(() => uploader.upload(target('one.bin'), chunked(one)));
    assert.deepEqual(single.map((r) => r.split(' ')[0]), ['PUT'], single.join(', '));
    assert.ok((await read('one.bin')).equals(one));
    // The same buffers again: nothing of the previous uploads leaks into this one.
    const small = randomBytes(1000);
    await uploader.upload(target('small.bin'), chunked(small, 7));
    assert.ok((await read('small.bin')).equals(small));
    await uploader.upload(target('empty.bin'), chunked(Buffer.alloc(0)));
    assert.equal((await read('empty.bin')).length, 0);
  });

  it('aborts the multipart upload of a body that fails mid-way, rethrows its error, and leaves no object', async () => {
    const uploader = new S3MultipartUploader(client);
    async function* cut(): AsyncGenerator<Uint8Array> {
      yield* chunked(randomBytes(PART_BYTES + MiB), MiB);
      throw new Error('the worker went away');
    }
    let failure: unknown;
    const sent = await requestsDuring(() => uploader.upload(target('cut.bin'), cut()).catch((err: unknown) => (failure = err)));
    assert.match(String(failure), /the worker went away/);
    const parts = sent.filter((r) => /^PUT .*[?&]partNumber=/.test(r));
    assert.equal(parts.length, 1, `the first part went up before the body failed: ${sent.join(', ')}`);
    const uploadId = /uploadId=([^&]+)/.exec(parts[0])![1];
    assert.ok(sent.some((r) => r.startsWith('DELETE ') && r.includes(`uploadId=${uploadId}`)), `AbortMultipartUpload was sent: ${sent.join(', ')}`);
    assert.ok(!sent.some((r) => r.startsWith('POST ') && r.includes(`uploadId=${uploadId}`)), 'never completed');
    assert.deepEqual(await objects(), []);
  });

  it('a body that fails within its first part sends nothing at all', async () => {
    const uploader = new S3MultipartUploader(client);
    async function* cut(): AsyncGenerator<Uint8Array> {
      yield randomBytes(MiB);
      throw new Error('cut short');
    }
    const sent = await requestsDuring(() => assert.rejects(uploader.upload(target('early.bin'), cut()), /cut short/));
    assert.deepEqual(sent, []);
    assert.deepEqual(await objects(), []);
  });

  it('a part the bucket refuses stops reading the body, aborts the upload and leaves no object', async () => {
    // A client whose second UploadPart fails, as a bucket gone mid-upload would.
    const o = s3.storeOptions('');
    const failing = new S3Client({ region: o.region, endpoint: o.endpoint, forcePathStyle: true, credentials: o.credentials, requestChecksumCalculation: 'WHEN_REQUIRED', responseChecksumValidation: 'WHEN_REQUIRED' });
    failing.middlewareStack.add(
      (next, context) => async (args) => {
        const input = args.input as { PartNumber?: number };
        if (context.commandName === 'UploadPartCommand' && input.PartNumber === 2) throw new Error('the bucket went away');
        return next(args);
      },
      { step: 'initialize' },
    );
    try {
      const uploader = new S3MultipartUploader(failing);
      // A body with no end: the upload can only finish by giving up on it.
      let pulled = 0;
      async function* endless(): AsyncGenerator<Uint8Array> {
        const block = randomBytes(MiB);
        for (;;) {
          pulled++;
          yield block;
        }
      }
      let failure: unknown;
      const sent = await requestsDuring(() => uploader.upload(target('refused.bin'), endless()).catch((err: unknown) => (failure = err)));
      assert.match(String(failure), /the bucket went away/);
      // At most the part after the failed one was read: one part sent, one refused, one being filled.
      assert.ok(pulled <= (3 * PART_BYTES) / MiB + 1, `read ${pulled} MiB of the body`);
      const uploadId = /uploadId=([^&]+)/.exec(sent.find((r) => /partNumber=1/.test(r))!)![1];
      assert.ok(sent.some((r) => r.startsWith('DELETE ') && r.includes(`uploadId=${uploadId}`)), `AbortMultipartUpload was sent: ${sent.join(', ')}`);
      assert.deepEqual(await objects(), []);
    } finally {
      failing.destroy();
    }
  });
});
