import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import fsp from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { ArtifactService } from '../api/services/artifacts/artifact-service.js';
import { LeaseStore, type LeaseRecord } from '../dispatch/lease-store.js';
import { ApiError } from '../models/errors.js';
import { hashSecret } from '../models/credentials.js';
import { newRunId } from '../models/ids.js';
import { TestGateway, cleanupPrefix, uniquePrefix } from './helpers/harness.js';

/** A body that records whether anyone read it: a refused upload must not store a byte of it. */
function watchedBody(bytes = 'hello'): AsyncIterable<Uint8Array> & { read: boolean } {
  const body = {
    read: false,
    async *[Symbol.asyncIterator]() {
      body.read = true;
      yield Buffer.from(bytes);
    },
  };
  return body;
}

/**
 * The checks of a worker upload, which the artifact route hands to ArtifactService whole: the
 * order of the refusals and that no byte is read before the upload is allowed. The HTTP answers
 * themselves are in test/artifacts.test.ts.
 */
describe('ArtifactService: worker uploads against their lease', function () {
  const prefix = uniquePrefix('artifact-service');
  let dataDir: string;
  let gw: TestGateway;
  let leases: LeaseStore;
  let artifacts: ArtifactService;

  before(async () => {
    dataDir = await fsp.mkdtemp(path.join(os.tmpdir(), 'sy-artifact-service-'));
    gw = await new TestGateway(prefix, { DATA_DIR: dataDir, ARTIFACT_MAX_BYTES: '1kb' }).start();
    leases = new LeaseStore(gw.redis, prefix);
    artifacts = gw.services.artifactService;
  });
  after(async () => {
    await gw?.stop();
    await cleanupPrefix(prefix);
    if (dataDir) await fsp.rm(dataDir, { recursive: true, force: true });
  });

  async function lease(): Promise<{ record: LeaseRecord; token: string }> {
    const token = `upl_${randomBytes(24).toString('base64url')}`;
    const record: LeaseRecord = {
      lease_id: `lse_${randomBytes(12).toString('hex')}`,
      run_id: newRunId('acct_uploads'),
      account_id: 'acct_uploads',
      worker_id: 'wkr_uploads',
      kind: 'inference:image:generate',
      tier: 'open',
      fence: 1,
      upload_hash: hashSecret(token),
      gateway_id: 'gw_uploads',
    };
    await leases.put(record, 60_000);
    return { record, token };
  }

  const refusal = (code: string, status: number) => (err: unknown) => err instanceof ApiError && err.code === code && err.status === status;
  /** Wrong on every other count: only the token check can answer first. */
  const wrongOnEveryCount = { name: '../x.png', contentEncoding: 'gzip', length: 10_000 };

  it('checks the upload token before anything else, and reads no byte of a refused upload', async () => {
    const { record, token } = await lease();
    const other = await lease();
    for (const [what, leaseId, presented] of [
      ['no token', record.lease_id, null],
      ['a wrong token', record.lease_id, `${token}x`],
      ["another lease's token", record.lease_id, other.token],
      ['an unknown lease', 'lse_doesnotexist', token],
    ] as const) {
      const body = watchedBody();
      await assert.rejects(artifacts.upload(leaseId, presented, body, wrongOnEveryCount), refusal('unauthorized', 401), what);
      assert.equal(body.read, false, `${what}: the body was read`);
    }
  });

  it('then refuses the name (400), the encoding (415) and a declared length over ARTIFACT_MAX_BYTES (413), in that order, before reading', async () => {
    const { record, token } = await lease();
    const steps = [
      { upload: wrongOnEveryCount, code: 'invalid_request', status: 400 },
      { upload: { ...wrongOnEveryCount, name: 'a.png' }, code: 'unsupported_media_type', status: 415 },
      { upload: { ...wrongOnEveryCount, name: 'a.png', contentEncoding: 'identity' }, code: 'payload_too_large', status: 413 },
    ];
    for (const { upload, code, status } of steps) {
      const body = watchedBody();
      await assert.rejects(artifacts.upload(record.lease_id, token, body, upload), refusal(code, status), code);
      assert.equal(body.read, false, `${code}: the body was read`);
    }
  });

  it("stores an allowed upload as the lease's run's, for its settlement to describe", async () => {
    const { record, token } = await lease();
    const meta = await artifacts.upload(record.lease_id, token, watchedBody('png bytes'), { name: 'out.png', contentType: '' });
    assert.deepEqual(
      { run_id: meta.run_id, lease_id: meta.lease_id, account_id: meta.account_id, size: meta.size, content_type: meta.content_type },
      { run_id: record.run_id, lease_id: record.lease_id, account_id: record.account_id, size: 9, content_type: 'image/png' },
    );
    assert.deepEqual(gw.services.artifacts.takeUploaded?.(meta.id), meta, 'settlement finds it without reading it back');
    assert.equal(artifacts.url(meta), `${gw.services.publicUrl()}/v1/artifacts/${meta.id}/out.png`);
    const served = await fetch(artifacts.url(meta));
    assert.equal(await served.text(), 'png bytes');
  });
});
