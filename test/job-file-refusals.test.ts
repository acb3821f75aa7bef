import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import type { ServerResponse } from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { RedisKeys } from '../models/redis/keys.js';
import { InputFiles } from '../api/services/files/input-files.js';
import type { FileService } from '../api/services/files/file-service.js';
import { ApiError } from '../models/errors.js';
import { FILE_KEYWORD, type KindSpec } from '../models/kinds.js';
import { TestGateway, cleanupPrefix, uniquePrefix, until } from './helpers/harness.js';
import { dataUri, samplePng, sampleWav } from './helpers/sample-files.js';
import { ToolServer } from './helpers/tool-server.js';

/**
 * A submission that makes no run keeps none of the files it staged from https URLs and data: URIs
 * (docs/files.md, "Files in job inputs"): not when a file field fails (its own type, or a later
 * field), not on insufficient credits or a vanished account, not on an idempotent replay that finds
 * the first request's run. Files the caller referenced by id stay whatever happens.
 */

const KIND = 'inference:3d:image-to-mesh';

/** A kind with two image fields (the catalogue has none yet), to stage one and fail the other. */
const TWO_FILES: KindSpec = {
  kind: 'test:two-files',
  rollout: 'live',
  description: 'two images',
  defaultPrice: 1,
  inputSchema: {
    type: 'object',
    properties: { first: { type: 'string', [FILE_KEYWORD]: { accept: ['image/png'] } }, second: { type: 'string', [FILE_KEYWORD]: { accept: ['image/png'] } } },
  },
  output: { artifacts: [], schema: { type: 'object' }, reported: [] },
};

describe('refused submissions keep no staged file', function () {
  this.timeout(30_000);
  const prefix = uniquePrefix('file-refusals');
  const dir = mkdtempSync(path.join(os.tmpdir(), 'file-refusals-'));
  const origin = new ToolServer(dir);
  let gw: TestGateway;
  const png = samplePng(8, 4);

  before(async () => {
    await origin.start();
    gw = await new TestGateway(prefix, { OUTBOUND_CA_FILE: origin.caFile, OUTBOUND_ALLOW_CIDRS: '127.0.0.1/32', OUTBOUND_ALLOWED_PORTS: String(origin.port), DATA_DIR: path.join(dir, 'data') }).start();
    origin.script('/photo.png', { status: 200, headers: { 'content-type': 'image/png' }, body: png });
    origin.script('/voice.wav', { status: 200, headers: { 'content-type': 'audio/wav' }, body: sampleWav() });
    origin.script('/missing.png', { status: 404 });
  });
  after(async () => {
    await gw?.stop();
    await origin.stop();
    await cleanupPrefix(prefix);
    rmSync(dir, { recursive: true, force: true });
  });

  /** The account's files (ids) and the bytes its quota counts. */
  async function filesOf(acct: { id: string }) {
    return { ids: (await gw.services.files.list(acct.id, { limit: 100 })).map((f) => f.id), used: await gw.stores.files.usedBytes(acct.id) };
  }

  /** An account holding one uploaded file, which no refusal may take away. */
  async function accountWithFile(credits: number) {
    const acct = await gw.account(credits, 'refusals');
    const kept = (await gw.request('POST', '/v1/files', { raw: samplePng(8, 9), key: acct.key, headers: { 'content-type': 'image/png' } })).body;
    return { acct, kept, before: await filesOf(acct) };
  }

  const staged = () => [dataUri('image/png', png), origin.url('/photo.png')];

  it('a file of a type its field does not take: the file staged for it goes', async () => {
    const { acct, before } = await accountWithFile(100);
    for (const value of [dataUri('audio/wav', sampleWav()), origin.url('/voice.wav')]) {
      const res = await gw.submit(acct.key, { kind: KIND, input: { image: value } });
      assert.equal(res.status, 400, res.text);
      assert.match(res.body.error.message, /\/input\/image takes image\/png/);
      assert.deepEqual(await filesOf(acct), before, value.slice(0, 40));
    }
  });

  it('a later file field that fails: the files staged for the earlier ones go', async () => {
    const { acct, kept, before } = await accountWithFile(100);
    const inputFiles = new InputFiles({
      files: gw.services.files,
      artifacts: gw.services.artifacts,
      outbound: gw.services.outbound,
      publicUrl: gw.services.publicUrl,
      dataUriMaxBytes: 1024 * 1024,
      fetchMaxBytes: 1024 * 1024,
      fetchTimeoutMs: 5000,
      log: gw.log,
    });
    for (const first of staged()) {
      for (const second of [origin.url('/missing.png'), 'file:///etc/passwd', dataUri('audio/wav', sampleWav())]) {
        const err = await inputFiles.stage(acct.id, TWO_FILES, { first, second }).then(
          () => assert.fail('expected a refusal'),
          (e: unknown) => e,
        );
        assert.ok(err instanceof ApiError && err.details?.path === '/input/second', String(err));
        assert.deepEqual(await filesOf(acct), before, `${first.slice(0, 30)} then ${second.slice(0, 30)}`);
      }
    }
    // What a staging made is what it lists as made, and discard deletes exactly that.
    const ok = await inputFiles.stage(acct.id, TWO_FILES, { first: staged()[0], second: kept.id });
    assert.equal(ok.created.length, 1);
    assert.equal(ok.input.first, ok.created[0]);
    assert.deepEqual((await filesOf(acct)).ids.sort(), [...before.ids, ok.created[0]].sort());
    await inputFiles.discard(acct.id, ok);
    assert.deepEqual(await filesOf(acct), before, 'the referenced file stays');
  });

  it('insufficient credits: 402, and the files staged for it go', async () => {
    const { acct, kept, before } = await accountWithFile(0);
    for (const value of [...staged(), kept.id]) {
      for (const headers of [{}, { 'idempotency-key': `poor-${value.length}` }] as Array<Record<string, string>>) {
        const res = await gw.submit(acct.key, { kind: KIND, input: { image: value } }, headers);
        assert.equal(res.status, 402, res.text);
        assert.deepEqual(await filesOf(acct), before, value.slice(0, 40));
      }
    }
  });

  it('an account that no longer exists: 401, and the files staged for it go', async () => {
    const { acct, before } = await accountWithFile(100);
    // The key record stays valid; only the account record (credits) is gone, as after a deletion
    // that the key cache has not caught up with.
    await gw.redis.del(new RedisKeys(prefix).account(acct.id));
    for (const value of staged()) {
      const res = await gw.submit(acct.key, { kind: KIND, input: { image: value } });
      assert.equal(res.status, 401, res.text);
      assert.match(res.body.error.message, /no longer exists/);
      assert.deepEqual(await filesOf(acct), before, value.slice(0, 40));
    }
  });

  it('an idempotent replay that finds the first request\'s run: the replay\'s file goes, the run keeps its own', async () => {
    const { acct, before } = await accountWithFile(100);
    const held: ServerResponse[] = [];
    origin.handle('/held.png', (_req, res) => void held.push(res));
    const release = (res: ServerResponse) => res.writeHead(200, { 'content-type': 'image/png' }).end(png);
    const body = { kind: KIND, input: { image: origin.url('/held.png') } };
    const headers = { 'idempotency-key': 'replay-while-staging' };
    // The first request claims the key and is held while it fetches; the second finds the claim
    // but no run yet, so it stages too, and is held as well.
    const first = gw.submit(acct.key, body, headers);
    await until('the first fetch', async () => held.length === 1);
    const second = gw.submit(acct.key, body, headers);
    await until('the second fetch', async () => held.length === 2);
    release(held[0]);
    const made = await first;
    assert.equal(made.status, 202, made.text);
    release(held[1]);
    const replayed = await second;
    assert.equal(replayed.status, 202, replayed.text);
    assert.equal(replayed.headers.get('idempotent-replayed'), 'true');
    assert.equal(replayed.body.run_id, made.body.run_id);
    const run = (await gw.stores.runs.get(made.body.run_id))!;
    const after = await filesOf(acct);
    assert.deepEqual(after.ids.sort(), [...before.ids, run.input.image].sort(), 'one staged file: the run\'s');
    assert.equal(after.used, before.used + png.length);
  });

  it('a staged file that cannot be deleted is logged, and discarding goes on without throwing (the refusal stands)', async () => {
    const warnings: Array<Record<string, unknown>> = [];
    const failing = { delete: async () => Promise.reject(new Error('disk on fire')) } as unknown as FileService;
    const inputFiles = new InputFiles({
      files: failing,
      artifacts: gw.services.artifacts,
      outbound: gw.services.outbound,
      publicUrl: gw.services.publicUrl,
      dataUriMaxBytes: 1024,
      fetchMaxBytes: 1024,
      fetchTimeoutMs: 5000,
      log: { warn: (obj: Record<string, unknown>) => void warnings.push(obj) } as never,
    });
    await inputFiles.discard('acct_x', { created: ['file_01J000000000000000000000AA', 'file_01J000000000000000000000AB'] });
    assert.deepEqual(warnings.map((w) => w.fileId), ['file_01J000000000000000000000AA', 'file_01J000000000000000000000AB']);
  });
});
