import fsp from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import S3rver from 's3rver';

/**
 * A local S3-compatible server standing in for Amazon S3, MinIO or Cloudflare R2: s3rver (npm,
 * pure JavaScript, keeps objects in a temporary directory) speaking the S3 REST API
 * (https://docs.aws.amazon.com/AmazonS3/latest/API/Welcome.html): GetObject with Range,
 * PutObject, DeleteObject, ListObjectsV2, and multipart uploads (Create, UploadPart, Complete).
 * What it lacks: AbortMultipartUpload answers 405, so the requests it receives are recorded and
 * a test shows that the store asks for the abort rather than that the parts are gone.
 */
export class S3StandIn {
  readonly bucket = 'switchyard-test';
  readonly accessKeyId = 'S3RVER';
  readonly secretAccessKey = 'S3RVER';
  readonly region = 'us-east-1';
  /** `METHOD /bucket/key?query` of every request, in arrival order. */
  readonly requests: string[] = [];
  private server?: http.Server;
  private dir?: string;
  endpoint = '';

  async start(): Promise<this> {
    this.dir = await fsp.mkdtemp(path.join(os.tmpdir(), 'sy-s3rver-'));
    const s3rver = new S3rver({ directory: this.dir, silent: true, configureBuckets: [{ name: this.bucket }] });
    await s3rver.configureBuckets();
    const handle = s3rver.callback();
    this.server = http.createServer((req, res) => {
      this.requests.push(`${req.method} ${req.url}`);
      handle(req, res);
    });
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    this.endpoint = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    return this;
  }

  /** The settings that point a gateway at this server, under a key prefix of its own. */
  env(prefix: string): Record<string, string> {
    return {
      STORAGE: 's3',
      S3_BUCKET: this.bucket,
      S3_ENDPOINT: this.endpoint,
      S3_REGION: this.region,
      S3_FORCE_PATH_STYLE: 'true',
      S3_PREFIX: prefix,
      AWS_ACCESS_KEY_ID: this.accessKeyId,
      AWS_SECRET_ACCESS_KEY: this.secretAccessKey,
    };
  }

  /** Options for an S3ArtifactStore in this process. */
  storeOptions(prefix: string) {
    return {
      bucket: this.bucket,
      prefix,
      endpoint: this.endpoint,
      region: this.region,
      forcePathStyle: true,
      credentials: { accessKeyId: this.accessKeyId, secretAccessKey: this.secretAccessKey },
    };
  }

  async stop(): Promise<void> {
    this.server?.closeAllConnections();
    await new Promise<void>((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
    if (this.dir) await fsp.rm(this.dir, { recursive: true, force: true });
  }
}
