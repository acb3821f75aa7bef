import type { ArtifactStore } from '../../models/artifact-store.js';
import { FsArtifactStore } from '../../models/fs-artifact-store.js';
import type { Config } from '../main/config.js';

/**
 * The store of artifacts and account files that STORAGE names. Both keep the same contract
 * (test/artifact-store-contract.test.ts); gateways serve each other's uploads when they share
 * `DATA_DIR/artifacts` (fs) or the bucket and S3_PREFIX (s3).
 */
export async function openArtifactStore(c: Config): Promise<ArtifactStore> {
  if (c.storage === 's3') {
    // Loaded only here: the AWS SDK is a few MB of modules (and, on Node 20, a deprecation
    // warning) that a gateway keeping its artifacts on disk has no use for.
    const { S3ArtifactStore } = await import('../../models/s3-artifact-store.js');
    // Credentials come from the AWS SDK's default chain: AWS_ACCESS_KEY_ID and
    // AWS_SECRET_ACCESS_KEY, AWS_PROFILE, web identity, or the instance's role.
    return new S3ArtifactStore({ bucket: c.s3.bucket, prefix: c.s3.prefix, endpoint: c.s3.endpoint, region: c.s3.region, forcePathStyle: c.s3.forcePathStyle });
  }
  return new FsArtifactStore({ root: `${c.dataDir}/artifacts` });
}
