import {
  AbortMultipartUploadCommand,
  CompleteMultipartUploadCommand,
  CreateMultipartUploadCommand,
  PutObjectCommand,
  UploadPartCommand,
  type CompletedPart,
  type S3Client,
} from '@aws-sdk/client-s3';

/** S3's smallest part (all but the last): the fewer bytes a part holds, the less an upload holds. */
export const PART_BYTES = 5 * 1024 * 1024;

/**
 * Part buffers kept between uploads: one upload's pair. More concurrent uploads allocate their
 * own and drop them when done; kept ones are the ~10 MiB a gateway that stores to S3 holds
 * for good, rather than allocating (and leaving V8 to collect) 5 MiB per part.
 */
const IDLE_BUFFERS = 2;

/** Where an object goes. */
export interface S3ObjectTarget {
  Bucket: string;
  Key: string;
  ContentType?: string;
}

/**
 * Streams a body into one S3 object, holding at most two part buffers whatever its size: one
 * being filled from the body while the other is sent as a part (one part in flight, so the
 * body is read while the bucket writes). The buffers are allocated once and reused for every
 * part and every upload (up to IDLE_BUFFERS kept idle), so no part allocates memory.
 *
 * Why not lib-storage's Upload: it keeps a part's chunks in a list until 5 MiB have come, then
 * concatenates them into a new 5 MiB buffer that lives while the part is sent. Held that long,
 * chunks and parts outlive scavenges, V8 promotes them, and only a full collection frees them,
 * which V8 starts once such memory has grown by tens of MB: under load a 60 MB upload grew the
 * gateway's peak RSS by 25-29 MB (issue 31). Here each chunk is copied into a part buffer as it
 * arrives and dies young, freed by the next scavenge.
 *
 * A body that fits one part is one PutObject. Otherwise a multipart upload, which S3 shows only
 * once completed: a body that throws (too large, cut short) or a request that fails aborts it
 * (AbortMultipartUpload, once the part in flight has settled, so that no part lands after the
 * abort) and the error is rethrown. The caller removes what a failed PutObject may have left.
 */
export class S3MultipartUploader {
  private readonly idle: Buffer[] = [];

  constructor(
    private readonly client: S3Client,
    private readonly partBytes = PART_BYTES,
  ) {}

  /** Sends every byte of `body` to `target`; resolves once the object is complete. */
  async upload(target: S3ObjectTarget, body: AsyncIterable<Uint8Array>): Promise<void> {
    const held: Buffer[] = [this.take()];
    let filling = held[0];
    let filled = 0;
    let uploadId: string | undefined;
    const parts: CompletedPart[] = [];
    /** Parts started (sent or being sent): one part in flight at a time, so they complete in order. */
    let started = 0;
    // The part being sent, and why it failed: a failure is seen at the next chunk rather than
    // after the next part has been read.
    let inFlight: Promise<void> | undefined;
    let sendError: { err: unknown } | undefined;
    let succeeded = false;

    const send = async (part: Buffer, length: number, PartNumber: number): Promise<void> => {
      uploadId ??= (await this.client.send(new CreateMultipartUploadCommand({ ...target }))).UploadId;
      const res = await this.client.send(new UploadPartCommand({ Bucket: target.Bucket, Key: target.Key, UploadId: uploadId, PartNumber, Body: part.subarray(0, length), ContentLength: length }));
      parts.push({ PartNumber, ETag: res.ETag });
    };
    /** Starts sending the full buffer, and switches to the other once it is free. */
    const flush = async (): Promise<void> => {
      await inFlight;
      if (sendError) throw sendError.err;
      const part = filling;
      inFlight = send(part, filled, ++started).catch((err: unknown) => void (sendError ??= { err }));
      if (held.length < 2) held.push(this.take());
      filling = held[0] === part ? held[1] : held[0];
      filled = 0;
    };

    try {
      for await (const chunk of body) {
        if (sendError) throw sendError.err;
        let offset = 0;
        while (offset < chunk.length) {
          // A full buffer is sent only once a byte past it arrives: a body of exactly one part
          // is then still one PutObject, and the last part is never empty.
          if (filled === filling.length) await flush();
          const n = Math.min(chunk.length - offset, filling.length - filled);
          filling.set(chunk.subarray(offset, offset + n), filled);
          filled += n;
          offset += n;
        }
      }
      if (started === 0) {
        await this.client.send(new PutObjectCommand({ ...target, Body: filling.subarray(0, filled), ContentLength: filled }));
      } else {
        await flush();
        await inFlight;
        if (sendError) throw sendError.err;
        await this.client.send(new CompleteMultipartUploadCommand({ Bucket: target.Bucket, Key: target.Key, UploadId: uploadId, MultipartUpload: { Parts: parts } }));
      }
      succeeded = true;
    } catch (err) {
      await inFlight;
      if (uploadId) {
        // The abort's own failure (a bucket down, a server without it) must not hide why the upload stopped.
        await this.client.send(new AbortMultipartUploadCommand({ Bucket: target.Bucket, Key: target.Key, UploadId: uploadId })).catch(() => {});
      }
      throw err;
    } finally {
      // Only the buffers of an upload that succeeded go back: after a failure the SDK may still
      // be writing one to a socket it has not closed yet, and another upload must not refill it.
      if (succeeded) for (const b of held) if (this.idle.length < IDLE_BUFFERS) this.idle.push(b);
    }
  }

  /** An idle part buffer, or a new one (its pages are only made resident as it is filled). */
  private take(): Buffer {
    return this.idle.pop() ?? Buffer.allocUnsafeSlow(this.partBytes);
  }
}
