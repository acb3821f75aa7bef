import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { ArtifactStore } from '../models/artifact-store.js';
import { KINDS } from '../models/kinds.js';
import { compile } from '../models/validation.js';
import { SwitchyardClient, type JobEvent } from '../sdk/client/index.js';
import { createDemoEngine } from '../sdk/engines/demo/index.js';
import { SwitchyardWorker, silentLogger } from '../sdk/worker/index.js';
import { TestGateway, cleanupPrefix, uniquePrefix, until } from './helpers/harness.js';
import { RawWorker, type Frame } from './helpers/raw-worker.js';
import { dataUri, sampleGlb, samplePng, sampleWav } from './helpers/sample-files.js';

/**
 * `output.files` of a succeeded run (dispatch/output-files.ts): written by the gateway at
 * settlement from its own record of each artifact, in the order of `urls`, so it says what a
 * download gets; null fields for a URL that is not one of its artifacts; never the worker's word.
 */

const sha256 = (b: Buffer) => createHash('sha256').update(b).digest('hex');
const IMAGE = 'inference:image:generate';

describe('output files', function () {
  this.timeout(60_000);
  const prefix = uniquePrefix('output-files');
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'output-files-'));
  let gw: TestGateway;
  let caller: { id: string; key: string };

  before(async () => {
    gw = await new TestGateway(prefix, { DATA_DIR: dataDir }).start();
    caller = await gw.account(100_000, 'output-files');
  });
  after(async () => {
    await gw?.stop();
    await cleanupPrefix(prefix);
    rmSync(dataDir, { recursive: true, force: true });
  });

  const job = async (runId: string) => (await gw.request('GET', `/v1/jobs/${runId}`, { key: caller.key })).body;
  const finished = (runId: string) => until(`${runId} to end`, async () => ((await job(runId)).terminal ? job(runId) : undefined), 30_000);

  it("a demo worker's job of every kind: files describe each URL, in order, as downloading it finds it, and output is what the kind's schema says", async () => {
    const token = await gw.workerToken('open', 'op-demo');
    const worker = new SwitchyardWorker({ gateway: gw.url, token, kinds: 'all', slots: 4, handler: createDemoEngine({ delayMs: 0, espeakNg: null, pocketsphinx: null }), logger: silentLogger });
    await worker.start();
    try {
      const files = { image: dataUri('image/png', samplePng(16, 5)), mesh: dataUri('model/gltf-binary', await sampleGlb()), audio: dataUri('audio/wav', sampleWav()) };
      const inputs: Record<string, Record<string, unknown>> = {
        'inference:image:generate': { prompt: 'a fox' },
        'inference:3d:image-to-mesh': { image: files.image },
        'inference:3d:text-to-mesh': { prompt: 'a chair' },
        'inference:video:generate': { prompt: 'a ball', image: files.image, fps: 4, duration_s: 0.5 },
        'inference:texture:generate': { mesh: files.mesh, prompt: 'bark' },
        'inference:rig': { mesh: files.mesh },
        'inference:llm:text-generate': { prompt: 'Tell me about trains' },
        'inference:audio:music-generate': { prompt: 'piano', duration_s: 0.3 },
        'inference:audio:sfx-generate': { prompt: 'zap', duration_s: 0.3 },
        'inference:audio:text-to-speech': { text: 'hello', reference_audio: files.audio },
        'inference:audio:transcribe': { audio: files.audio },
      };
      const caps = (await gw.request('GET', '/v1/capabilities', { key: caller.key })).body.kinds as Array<{ kind: string; output_schema: object }>;
      const submitted = await Promise.all(
        KINDS.map(async ({ kind }) => {
          const res = await gw.submit(caller.key, { kind, input: inputs[kind] });
          assert.equal(res.status, 202, `${kind}: ${res.text}`);
          return { kind, runId: res.body.run_id as string };
        }),
      );
      for (const { kind, runId } of submitted) {
        const done = await finished(runId);
        assert.equal(done.status, 'succeeded', `${kind}: ${JSON.stringify(done.error)}`);
        const { urls, files: described } = done.output as { urls: string[]; files: Array<Record<string, unknown>> };
        assert.ok(urls.length > 0, kind);
        assert.deepEqual(described.map((f) => f.url), urls, `${kind}: one entry per URL, in order`);
        for (const file of described) {
          const res = await fetch(file.url as string);
          assert.equal(res.status, 200);
          const bytes = Buffer.from(await res.arrayBuffer());
          assert.deepEqual(file, {
            url: file.url,
            name: decodeURIComponent(new URL(file.url as string).pathname.split('/').pop()!),
            content_type: res.headers.get('content-type'),
            size: bytes.length,
            sha256: sha256(bytes),
          }, kind);
        }
        const validate = compile(caps.find((c) => c.kind === kind)!.output_schema);
        assert.ok(validate(done.output), `${kind}: ${JSON.stringify(validate.errors?.map((e) => [e.instancePath, e.message]))}`);
      }

      // The SSE stream's last event, read by the client library, carries the very same output.
      const { runId } = submitted[0];
      const events: JobEvent[] = [];
      for await (const e of new SwitchyardClient({ baseUrl: gw.url, apiKey: caller.key }).stream(runId)) events.push(e);
      const last = events.at(-1)!;
      assert.ok(last.event === 'done');
      assert.deepEqual(last.data.output, (await job(runId)).output);
    } finally {
      await worker.stop({ timeoutMs: 0 });
    }
  });

  /** A raw worker holding a fresh image job's lease, and an upload under it. */
  async function leased(name: string): Promise<{ worker: RawWorker; lease: Frame; upload: { url: string; sha256: string; size: number; content_type: string }; runId: string; bytes: Buffer }> {
    const worker = await new RawWorker(gw.url, await gw.workerToken('open', `op-${name}`)).connect({ kinds: [IMAGE], slots: 1 });
    const runId = (await gw.submit(caller.key, { kind: IMAGE, input: { prompt: name } })).body.run_id as string;
    const lease = await until('the lease', async () => worker.leases().find((l) => l.run_id === runId));
    const bytes = samplePng(8, name.length);
    const res = await fetch(`${lease.upload_url}?name=${encodeURIComponent(`${name}.png`)}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${lease.upload_token}`, 'content-type': 'image/png' },
      body: bytes,
    });
    assert.equal(res.status, 201, await res.clone().text());
    return { worker, lease, upload: (await res.json()) as { url: string; sha256: string; size: number; content_type: string }, runId, bytes };
  }

  it("describes only this gateway's artifacts: other URLs get null fields, and the worker's own files are replaced", async () => {
    const { worker, lease, upload, runId, bytes } = await leased('mine');
    try {
      const [, id] = /\/v1\/artifacts\/([a-z2-7]+)\//.exec(upload.url)!;
      const urls = [
        'https://cdn.example.com/renders/final%20cut.png?sig=abc#top',
        upload.url,
        // One of this gateway's artifacts under another name, and an id it never made: what a download of each would answer is 404.
        `${gw.url}/v1/artifacts/${id}/other.png`,
        `${gw.url}/v1/artifacts/${'q'.repeat(32)}/ghost.png`,
        upload.url,
      ];
      const lie = { url: upload.url, name: 'mine.png', content_type: 'image/png', size: 1, sha256: '0'.repeat(64) };
      const ack = await worker.report(lease, { type: 'complete', output: { urls, files: [lie], width: 8 } });
      assert.equal(ack.type, 'ack', JSON.stringify(ack));
      const none = { content_type: null, size: null, sha256: null };
      const mine = { url: upload.url, name: 'mine.png', content_type: 'image/png', size: bytes.length, sha256: sha256(bytes) };
      const output = (await job(runId)).output;
      assert.deepEqual(output, {
        urls,
        width: 8,
        files: [
          { url: urls[0], name: 'final cut.png', ...none },
          mine,
          { url: urls[2], name: 'other.png', ...none },
          { url: urls[3], name: 'ghost.png', ...none },
          mine,
        ],
      });
      assert.equal(mine.sha256, upload.sha256);
    } finally {
      worker.close();
    }
  });

  it('a store that fails to read a record does not cost the completion: that entry has null fields, with a warning', async () => {
    const { worker, lease, upload, runId } = await leased('unread');
    const store = gw.services.artifacts as ArtifactStore;
    const realGet = store.get;
    const realWarn = gw.log.warn;
    const warnings: unknown[][] = [];
    const realTake = store.takeUploaded;
    // As if another gateway sharing the data dir took the upload: only the store has its record.
    store.takeUploaded = () => null;
    store.get = async (id) => (upload.url.includes(id) ? Promise.reject(Object.assign(new Error('EIO: i/o error'), { code: 'EIO' })) : realGet.call(store, id));
    gw.log.warn = ((...args: unknown[]) => (warnings.push(args), realWarn.apply(gw.log, args as never))) as typeof gw.log.warn;
    try {
      const ack = await worker.report(lease, { type: 'complete', output: { urls: [upload.url] } });
      assert.equal(ack.type, 'ack', JSON.stringify(ack));
      const done = await job(runId);
      assert.equal(done.status, 'succeeded');
      assert.deepEqual(done.output.files, [{ url: upload.url, name: 'unread.png', content_type: null, size: null, sha256: null }]);
      assert.ok(warnings.some(([obj, msg]) => (obj as { url?: string }).url === upload.url && /output\.files/.test(String(msg))), JSON.stringify(warnings));
    } finally {
      store.get = realGet;
      store.takeUploaded = realTake;
      gw.log.warn = realWarn;
      worker.close();
    }
  });

  it("describes an upload this gateway took from the record it kept, without reading the store back", async () => {
    const { worker, lease, upload, runId, bytes } = await leased('kept');
    const store = gw.services.artifacts as ArtifactStore;
    const realGet = store.get;
    let reads = 0;
    store.get = async (id) => (reads++, realGet.call(store, id));
    try {
      const ack = await worker.report(lease, { type: 'complete', output: { urls: [upload.url] } });
      assert.equal(ack.type, 'ack', JSON.stringify(ack));
      const done = await job(runId);
      assert.deepEqual(done.output.files, [{ url: upload.url, name: 'kept.png', content_type: 'image/png', size: bytes.length, sha256: sha256(bytes) }]);
      assert.equal(reads, 0);
    } finally {
      store.get = realGet;
      worker.close();
    }
  });
});
