import { createHash } from 'node:crypto';
import { Readable } from 'node:stream';
import { DeleteObjectCommand, GetObjectCommand, ListObjectsV2Command, PutObjectCommand, S3Client, S3ServiceException } from '@aws-sdk/client-s3';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import { ARTIFACT_ID_PATTERN, artifactRecord, type ArtifactMeta, type ArtifactStore, type ByteRange, type PresignedResponse, type PutArtifact } from './artifact-store.js';
import { ApiError, NotFoundError } from './errors.js';
import { newArtifactId } from './ids.js';
import { S3MultipartUploader } from './s3-multipart-upload.js';
import { UploadedRecords } from './uploaded-records.js';

export interface S3ArtifactStoreOptions {
  bucket: string;
  /** Every key starts with it ('' or ending in `/`): several deployments, or tests, may share a bucket. */
  prefix?: string;
  /** An S3-compatible server (MinIO, R2, Ceph...); unset, AWS's endpoint for `region`. */
  endpoint?: string;
  region: string;
  /** `https://endpoint/bucket/key` rather than `https://bucket.endpoint/key`: most S3-compatible servers want it. */
  forcePathStyle?: boolean;
  /** For tests; otherwise the AWS SDK's default chain (AWS_ACCESS_KEY_ID..., a profile, the instance role). */
  credentials?: { accessKeyId: string; secretAccessKey: string };
}

/** How long connecting to the bucket may take. */
const CONNECT_TIMEOUT_MS = 10_000;

/** A marker older than this whose record is missing is an abandoned upload (a gateway that crashed mid-upload). */
const ABANDONED_MS = 24 * 3600 * 1000;
/** Expiry markers are named by 13-digit epoch milliseconds, so that their keys sort by time. */
const EXPIRY_DIGITS = 13;

const isMissing = (err: unknown): boolean =>
  err instanceof S3ServiceException && (err.name === 'NoSuchKey' || err.name === 'NotFound' || err.$metadata?.httpStatusCode === 404);

/** An S3 failure is the storage's trouble, not the caller's: 503, and the worker's upload retries. */
function unavailable(err: unknown): unknown {
  if (err instanceof ApiError) return err;
  return new ApiError('unavailable', 'the artifact storage is unavailable; retry later', { headers: { 'Retry-After': '5' }, cause: err });
}

/**
 * Artifacts in an S3-compatible bucket. Keys under `prefix`:
 *
 * - `data/<id>`: the bytes, streamed in as a multipart upload ({@link S3MultipartUploader}, two
 *   reused 5 MiB part buffers whatever the size), with the artifact's Content-Type. S3 shows a
 *   multipart object only once it is completed, and an upload that fails (too large, cut, S3
 *   down) is aborted: its parts go, no object appears.
 * - `meta/<id>`: the record ({@link ArtifactMeta}) as JSON, written last, once the sha256 and
 *   size are known. An artifact exists exactly when its record does: every reader starts there.
 *   A sidecar object rather than S3 user metadata, which is set when the upload starts (before
 *   the hash is known) and could only be changed by copying the whole object.
 * - `expires/<epoch ms>/<id>`: an empty marker, written beside the bytes, named by the time the
 *   artifact expires. The sweeper lists this prefix up to now (keys sort by time) instead of
 *   reading every record; a marker whose record never came is an upload abandoned mid-way,
 *   whose bytes go once the marker is a day old.
 *
 * Records are small and immutable, so `get` is one GET of a few hundred bytes.
 */
export class S3ArtifactStore implements ArtifactStore {
  readonly client: S3Client;
  readonly bucket: string;
  readonly prefix: string;
  private readonly uploaded = new UploadedRecords();
  /** Holds the part buffers, reused by every upload of this store. */
  private readonly uploader: S3MultipartUploader;

  constructor(opts: S3ArtifactStoreOptions) {
    this.bucket = opts.bucket;
    this.prefix = opts.prefix ?? '';
    this.client = new S3Client({
      region: opts.region,
      endpoint: opts.endpoint,
      forcePathStyle: opts.forcePathStyle,
      credentials: opts.credentials,
      // The gateway hashes every byte itself (sha256, the ETag); the SDK's own default checksums
      // (CRC32, aws-chunked bodies) are refused by several S3-compatible servers.
      requestChecksumCalculation: 'WHEN_REQUIRED',
      responseChecksumValidation: 'WHEN_REQUIRED',
      requestHandler: {
        // A download holds its connection to the bucket for as long as the caller reads: one per
        // caller's connection, which the process's file descriptors already bound. The SDK's
        // default of 50 had the 51st slow download, and every record read, wait for a socket.
        httpAgent: { keepAlive: true, maxSockets: Infinity },
        httpsAgent: { keepAlive: true, maxSockets: Infinity },
        // An unreachable endpoint fails the request (503) rather than waiting out TCP's retries.
        connectionTimeout: CONNECT_TIMEOUT_MS,
      },
    });
    this.uploader = new S3MultipartUploader(this.client);
  }

  private dataKey(id: string): string {
    return `${this.prefix}data/${id}`;
  }

  private metaKey(id: string): string {
    return `${this.prefix}meta/${id}`;
  }

  private expiryPrefix(): string {
    return `${this.prefix}expires/`;
  }

  private expiryKey(expiresMs: number, id: string): string {
    return `${this.expiryPrefix()}${String(expiresMs).padStart(EXPIRY_DIGITS, '0')}/${id}`;
  }

  /** Nothing to create: the bucket is the operator's (its lifecycle rules too); reading a missing record checks access. */
  async init(): Promise<void> {
    try {
      await this.readMeta(newArtifactId());
    } catch (err) {
      throw new Error(`the S3 bucket ${this.bucket} cannot be read: ${(err as Error).message}`, { cause: err });
    }
  }

  async put(body: AsyncIterable<Uint8Array>, opts: PutArtifact): Promise<ArtifactMeta> {
    const id = newArtifactId();
    // Retention counts from the upload's start, so the marker (written first) names the expiry.
    const expiresMs = Date.now() + opts.retentionSeconds * 1000;
    const hash = createHash('sha256');
    let size = 0;
    // Why the body stopped (too large, cut short): the abort of the multipart upload that follows
    // may itself fail, and its error must not hide this one.
    let bodyError: unknown;
    const max = opts.maxBytes;
    async function* counted(): AsyncGenerator<Uint8Array> {
      try {
        for await (const chunk of body) {
          size += chunk.length;
          if (size > max) throw new ApiError('payload_too_large', `an artifact may be at most ${max} bytes`, { details: { max_bytes: max } });
          hash.update(chunk);
          yield chunk;
        }
      } catch (err) {
        bodyError = err;
        throw err;
      }
    }
    // The marker goes up beside the bytes rather than before them: one round trip fewer per
    // upload. Both are awaited before the record, so an artifact always has its marker.
    const marked = this.client.send(new PutObjectCommand({ Bucket: this.bucket, Key: this.expiryKey(expiresMs, id), Body: new Uint8Array(0), ContentLength: 0 }));
    try {
      const upload = this.uploader.upload({ Bucket: this.bucket, Key: this.dataKey(id), ContentType: opts.contentType }, counted());
      const [bytes, marker] = await Promise.allSettled([upload, marked]);
      if (bytes.status === 'rejected') throw bytes.reason;
      if (marker.status === 'rejected') throw marker.reason;
      const meta = artifactRecord(id, opts, { size, sha256: hash.digest('hex'), createdMs: Date.now(), expiresMs });
      await this.client.send(new PutObjectCommand({ Bucket: this.bucket, Key: this.metaKey(id), Body: JSON.stringify(meta), ContentType: 'application/json' }));
      if (meta.run_id) this.uploaded.remember(meta);
      return meta;
    } catch (err) {
      // A small upload goes as one PutObject, which may have landed before a later step failed;
      // the marker's request has settled (allSettled), so its removal cannot overtake it.
      await marked.catch(() => {});
      await this.removeKeys([this.dataKey(id), this.metaKey(id), this.expiryKey(expiresMs, id)]).catch(() => {});
      throw bodyError ?? unavailable(err);
    }
  }

  takeUploaded(id: string): ArtifactMeta | null {
    return this.uploaded.take(id);
  }

  private async readMeta(id: string): Promise<ArtifactMeta | null> {
    let text: string;
    try {
      const res = await this.client.send(new GetObjectCommand({ Bucket: this.bucket, Key: this.metaKey(id) }));
      text = await res.Body!.transformToString('utf8');
    } catch (err) {
      if (isMissing(err)) return null;
      throw err;
    }
    try {
      const meta = JSON.parse(text) as ArtifactMeta;
      return meta?.id === id ? meta : null;
    } catch {
      return null;
    }
  }

  async get(id: string): Promise<ArtifactMeta | null> {
    if (!ARTIFACT_ID_PATTERN.test(id)) return null;
    const meta = await this.readMeta(id).catch((err) => {
      throw unavailable(err);
    });
    return meta && Date.parse(meta.expires_at) > Date.now() ? meta : null;
  }

  async open(id: string, range?: ByteRange): Promise<Readable> {
    if (!ARTIFACT_ID_PATTERN.test(id)) throw new NotFoundError('artifact');
    try {
      const res = await this.client.send(
        new GetObjectCommand({ Bucket: this.bucket, Key: this.dataKey(id), Range: range ? `bytes=${range.start}-${range.end}` : undefined }),
      );
      // In Node the body is the response's IncomingMessage: destroying it (a client gone) frees the socket.
      return res.Body as Readable;
    } catch (err) {
      if (isMissing(err)) throw new NotFoundError('artifact');
      // A range starting past the end: the file store answers no bytes, and so does this one.
      if (err instanceof S3ServiceException && err.name === 'InvalidRange') return Readable.from([]);
      throw unavailable(err);
    }
  }

  /** A presigned GetObject: no credential needed, the headers given as `response-*` overrides (signed too). */
  async presignedGet(id: string, response: PresignedResponse, expiresInSeconds: number): Promise<string> {
    const command = new GetObjectCommand({
      Bucket: this.bucket,
      Key: this.dataKey(id),
      ResponseContentType: response.contentType,
      ResponseContentDisposition: response.contentDisposition,
      ResponseCacheControl: response.cacheControl,
    });
    return getSignedUrl(this.client, command, { expiresIn: expiresInSeconds });
  }

  private async removeKeys(keys: string[]): Promise<void> {
    // One DeleteObject per key: DeleteObjects needs a Content-MD5 some S3-compatible servers check differently.
    await Promise.all(keys.map((Key) => this.client.send(new DeleteObjectCommand({ Bucket: this.bucket, Key }))));
  }

  async delete(id: string): Promise<void> {
    if (!ARTIFACT_ID_PATTERN.test(id)) return;
    this.uploaded.forget(id);
    try {
      const meta = await this.readMeta(id);
      // The record goes last: until then readers see the artifact whole, or not at all.
      await this.removeKeys(meta ? [this.dataKey(id), this.expiryKey(Date.parse(meta.expires_at), id)] : [this.dataKey(id)]);
      await this.removeKeys([this.metaKey(id)]);
    } catch (err) {
      throw unavailable(err);
    }
  }

  async deleteExpired(now: Date): Promise<number> {
    const cutoff = now.getTime();
    const end = this.expiryKey(cutoff, '');
    let deleted = 0;
    let token: string | undefined;
    do {
      const page = await this.client.send(new ListObjectsV2Command({ Bucket: this.bucket, Prefix: this.expiryPrefix(), ContinuationToken: token }));
      for (const { Key } of page.Contents ?? []) {
        // Keys come in time order: the first past now ends the sweep.
        if (!Key || Key > end) return deleted;
        const m = /^(\d{13})\/([a-z2-7]{32})$/.exec(Key.slice(this.expiryPrefix().length));
        if (!m) continue;
        const [, ms, id] = m;
        const meta = await this.readMeta(id);
        if (meta) {
          // Only an expiry we can read deletes; the record's is the marker's.
          if (Date.parse(meta.expires_at) > cutoff) continue;
          await this.removeKeys([this.dataKey(id)]);
          await this.removeKeys([this.metaKey(id), Key]);
          deleted++;
        } else if (Number(ms) < cutoff - ABANDONED_MS) {
          // No record a day past its expiry: an upload cut by a crash, or an artifact deleted by hand.
          await this.removeKeys([this.dataKey(id), Key]);
        }
      }
      token = page.IsTruncated ? page.NextContinuationToken : undefined;
    } while (token);
    return deleted;
  }
}
