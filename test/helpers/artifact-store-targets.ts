import { randomBytes } from 'node:crypto';
import fsp from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { ListObjectsV2Command } from '@aws-sdk/client-s3';
import type { ArtifactStore } from '../../models/artifact-store.js';
import { FsArtifactStore } from '../../models/fs-artifact-store.js';
import { S3ArtifactStore } from '../../models/s3-artifact-store.js';
import { S3StandIn } from './s3-stand-in.js';

/** One artifact store contract, every store: the filesystem one and the S3 one (on a local stand-in). */
export interface ArtifactTarget {
  name: string;
  /** Brings up what the stores need (an S3 stand-in); once per suite. */
  before(): Promise<void>;
  after(): Promise<void>;
  /**
   * A fresh store over empty storage; `peer` opens the same storage as a second gateway would;
   * `leftovers` lists everything stored (files, objects), to show a failed upload left nothing.
   */
  open(): Promise<{ store: ArtifactStore; peer(): ArtifactStore; leftovers(): Promise<string[]>; teardown(): Promise<void> }>;
}

const fsTarget = (): ArtifactTarget => ({
  name: 'fs',
  async before() {},
  async after() {},
  async open() {
    const root = await fsp.mkdtemp(path.join(os.tmpdir(), 'sy-artifact-contract-'));
    const store = new FsArtifactStore({ root });
    await store.init();
    return {
      store,
      peer: () => new FsArtifactStore({ root }),
      async leftovers() {
        const entries = await fsp.readdir(root, { withFileTypes: true, recursive: true });
        return entries.filter((e) => e.isFile()).map((e) => e.name);
      },
      teardown: () => fsp.rm(root, { recursive: true, force: true }),
    };
  },
});

/** The S3 stand-in of this target, for tests that look at the requests it received. */
export const s3StandIn = new S3StandIn();

const s3Target = (): ArtifactTarget => ({
  name: 's3 (s3rver standing in for S3, MinIO or R2)',
  before: async () => void (await s3StandIn.start()),
  after: () => s3StandIn.stop(),
  async open() {
    // A key prefix per test: one bucket, no test sees another's objects.
    const prefix = `contract-${randomBytes(6).toString('hex')}/`;
    const store = new S3ArtifactStore(s3StandIn.storeOptions(prefix));
    await store.init();
    return {
      store,
      peer: () => new S3ArtifactStore(s3StandIn.storeOptions(prefix)),
      async leftovers() {
        const res = await store.client.send(new ListObjectsV2Command({ Bucket: s3StandIn.bucket, Prefix: prefix }));
        return (res.Contents ?? []).map((o) => o.Key!);
      },
      async teardown() {
        store.client.destroy();
      },
    };
  },
});

export const artifactTargets: ArtifactTarget[] = [fsTarget(), s3Target()];
