import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import type { ServerResponse } from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { artifactFilesUnder, hasRecord, readArtifactFile } from './helpers/artifact-files.js';
import { ADMIN_TOKEN, TestGateway, cleanupPrefix, errorCode, uniquePrefix } from './helpers/harness.js';
import { GatewayProcess } from './helpers/gateway-process.js';
import { samplePng } from './helpers/sample-files.js';
import { ToolServer, resetConnection } from './helpers/tool-server.js';

/**
 * The https URLs of job file fields (docs/files.md, "Files in job inputs"): the file is streamed
 * from the SSRF guard into the account's files, never held whole; an answer that never comes,
 * a body that stalls, crawls past FILE_FETCH_TIMEOUT_MS, passes FILE_MAX_BYTES, is cut short or
 * redirects is a 4xx naming the field, and leaves no file, no partial bytes and no quota charge.
 */

const TOTAL_MS = 500;
const FETCH_MS = 3000;
const MAX_BYTES = 256 * 1024;
const sha256 = (b: Buffer) => createHash('sha256').update(b).digest('hex');

/** Writes `bytes`, then `size - bytes.length` more (zeros), waiting for the socket as it fills; ends unless told not to. */
async function send(res: ServerResponse, bytes: Buffer, size: number, end = true): Promise<void> {
  if (!res.write(bytes)) await new Promise((r) => res.once('drain', r));
  const block = Buffer.alloc(64 * 1024);
  for (let sent = bytes.length; sent < size && !res.destroyed; sent += block.length) {
    if (!res.write(block.subarray(0, Math.min(block.length, size - sent)))) await new Promise((r) => res.once('drain', r));
  }
  if (end) res.end();
}

/** A PNG's first bytes (enough to be typed as one), padded with zeros to `size`. */
const pngOf = (size: number) => Buffer.concat([samplePng(8), Buffer.alloc(Math.max(0, size - samplePng(8).length))]);

/** Every artifact file under `root`: the partial uploads (no record yet), and the stored files' metadata by account. */
function artifactsOn(root: string): { partial: string[]; accounts: string[] } {
  const files = artifactFilesUnder(root);
  return { partial: files.filter((f) => !hasRecord(f)), accounts: files.filter(hasRecord).map((f) => readArtifactFile(f).meta.account_id) };
}

describe('job file inputs from https URLs: streamed, and failures keep nothing', function () {
  this.timeout(60_000);
  const prefix = uniquePrefix('file-fetch');
  const dir = mkdtempSync(path.join(os.tmpdir(), 'file-fetch-'));
  const origin = new ToolServer(dir);
  let gw: TestGateway;

  before(async () => {
    await origin.start();
    gw = await new TestGateway(prefix, {
      OUTBOUND_CA_FILE: origin.caFile,
      OUTBOUND_ALLOW_CIDRS: '127.0.0.1/32',
      OUTBOUND_ALLOWED_PORTS: String(origin.port),
      OUTBOUND_TOTAL_TIMEOUT_MS: String(TOTAL_MS),
      FILE_FETCH_TIMEOUT_MS: String(FETCH_MS),
      FILE_MAX_BYTES: String(MAX_BYTES),
      DATA_DIR: path.join(dir, 'data'),
      // The filesystem store, whatever the run's storage: these tests look for partial files in it.
      STORAGE: 'fs',
    }).start();
    origin.handle('/hang.png', () => {});
    origin.handle('/stall.png', (_req, res) => {
      res.writeHead(200, { 'content-type': 'image/png', 'content-length': String(200 * 1024) });
      // Past the 4 KB the type is read from: the bytes are being written to storage when it stalls.
      void send(res, pngOf(64 * 1024), 64 * 1024, false);
    });
    origin.handle('/crawl.png', (_req, res) => {
      res.writeHead(200, { 'content-type': 'image/png' });
      void send(res, pngOf(16 * 1024), 16 * 1024, false);
      // A byte every 100 ms: never a pause of OUTBOUND_TOTAL_TIMEOUT_MS, never an end.
      const timer = setInterval(() => res.write('.'), 100);
      res.on('close', () => clearInterval(timer));
    });
    origin.handle('/declared-big.png', (_req, res) => {
      res.writeHead(200, { 'content-type': 'image/png', 'content-length': String(MAX_BYTES + 1) });
      void send(res, pngOf(MAX_BYTES + 1), MAX_BYTES + 1);
    });
    origin.handle('/chunked-big.png', (_req, res) => {
      res.writeHead(200, { 'content-type': 'image/png' });
      void send(res, pngOf(MAX_BYTES + 1), MAX_BYTES + 1);
    });
    origin.handle('/reset.png', (req, res) => {
      res.writeHead(200, { 'content-type': 'image/png', 'content-length': String(200 * 1024) });
      void send(res, pngOf(64 * 1024), 64 * 1024, false).then(() => resetConnection(req.socket));
    });
    origin.handle('/chunked.png', (_req, res) => {
      res.writeHead(200, { 'content-type': 'image/png' });
      void send(res, pngOf(MAX_BYTES), MAX_BYTES);
    });
    origin.script('/photo.png', { status: 200, headers: { 'content-type': 'image/png' }, body: samplePng(8) });
    origin.script('/moved.png', { status: 302, headers: { location: origin.url('/photo.png') } });
    origin.script('/missing.png', { status: 404 });
  });
  after(async () => {
    await gw?.stop();
    await origin.stop();
    await cleanupPrefix(prefix);
    rmSync(dir, { recursive: true, force: true });
  });

  /** Submits an image-to-mesh job whose image is `url`, with a new account; the answer, how long it took, and the account. */
  async function submit(url: string) {
    const acct = await gw.account(100, 'fetch');
    const started = Date.now();
    const res = await gw.submit(acct.key, { kind: 'inference:3d:image-to-mesh', input: { image: url } });
    return { res, ms: Date.now() - started, acct };
  }

  /** The account has no file, no used quota, no run, its credits whole; no partial upload is left in storage. */
  async function assertNothingKept(acct: { id: string; key: string }) {
    assert.deepEqual((await gw.request('GET', '/v1/files', { key: acct.key })).body.data, []);
    assert.equal(await gw.stores.files.usedBytes(acct.id), 0);
    assert.deepEqual((await gw.request('GET', '/v1/jobs', { key: acct.key })).body.data, []);
    const account = (await gw.request('GET', '/v1/account', { key: acct.key })).body;
    assert.deepEqual({ credits: account.credits, reserved: account.reserved }, { credits: 100, reserved: 0 });
    const stored = artifactsOn(path.join(dir, 'data', 'artifacts'));
    assert.deepEqual(stored.partial, [], 'no partial upload left');
    assert.ok(!stored.accounts.includes(acct.id), 'no stored bytes of the account');
  }

  /** Asserts a 4xx naming the image field, with `code` and `reason`. */
  function assertRefused(res: Awaited<ReturnType<typeof submit>>['res'], status: number, code: string, reason?: string) {
    assert.equal(res.status, status, res.text);
    assert.equal(errorCode(res), code);
    assert.match(res.body.error.message, /^\/input\/image: /);
    assert.equal(res.body.error.details.path, '/input/image');
    if (reason) assert.equal(res.body.error.details.reason, reason);
  }

  it('stores a file that arrives in many chunks, typed and named from the URL', async () => {
    const { res, acct } = await submit(origin.url('/chunked.png'));
    assert.equal(res.status, 202, res.text);
    const [file] = (await gw.request('GET', '/v1/files', { key: acct.key })).body.data;
    assert.deepEqual({ filename: file.filename, content_type: file.content_type, size: file.size, sha256: file.sha256 }, { filename: 'chunked.png', content_type: 'image/png', size: MAX_BYTES, sha256: sha256(pngOf(MAX_BYTES)) });
  });

  it('an answer that never comes: 400 timeout within OUTBOUND_TOTAL_TIMEOUT_MS', async () => {
    const { res, ms, acct } = await submit(origin.url('/hang.png'));
    assertRefused(res, 400, 'invalid_request', 'timeout');
    assert.ok(ms >= TOTAL_MS - 50 && ms < TOTAL_MS + 1500, `answered after ${ms} ms`);
    await assertNothingKept(acct);
  });

  it('headers, then a body that stalls while it is being stored: 400 timeout', async () => {
    const { res, ms, acct } = await submit(origin.url('/stall.png'));
    assertRefused(res, 400, 'invalid_request', 'timeout');
    assert.match(res.body.error.message, /paused/);
    assert.ok(ms < FETCH_MS, `answered after ${ms} ms: the pause limit, not the fetch's`);
    await assertNothingKept(acct);
  });

  it('a body that keeps moving but does not end within FILE_FETCH_TIMEOUT_MS: 400 timeout', async () => {
    const { res, ms, acct } = await submit(origin.url('/crawl.png'));
    assertRefused(res, 400, 'invalid_request', 'timeout');
    assert.match(res.body.error.message, new RegExp(`did not end within ${FETCH_MS} ms`));
    assert.ok(ms >= FETCH_MS - 50, `answered after ${ms} ms`);
    await assertNothingKept(acct);
  });

  it('more than FILE_MAX_BYTES, announced or streamed: 413 payload_too_large', async () => {
    for (const url of [origin.url('/declared-big.png'), origin.url('/chunked-big.png')]) {
      const { res, acct } = await submit(url);
      assertRefused(res, 413, 'payload_too_large', 'response_too_large');
      assert.equal(res.body.error.details.max_bytes, MAX_BYTES);
      await assertNothingKept(acct);
    }
  });

  it('a connection reset mid-body: 400 connect_failed', async () => {
    const { res, acct } = await submit(origin.url('/reset.png'));
    assertRefused(res, 400, 'invalid_request', 'connect_failed');
    assert.match(res.body.error.message, /before the response was complete|connection failed/);
    await assertNothingKept(acct);
  });

  it('a redirect, even to an address the guard allows: 400, and the target is never asked', async () => {
    const asked = origin.at('/photo.png').length;
    const { res, acct } = await submit(origin.url('/moved.png'));
    assertRefused(res, 400, 'invalid_request');
    assert.match(res.body.error.message, /redirect \(302\)/);
    assert.equal(origin.at('/photo.png').length, asked);
    await assertNothingKept(acct);
  });

  it('an error status: 400', async () => {
    const { res, acct } = await submit(origin.url('/missing.png'));
    assertRefused(res, 400, 'invalid_request');
    assert.match(res.body.error.message, /answered 404/);
    await assertNothingKept(acct);
  });
});

describe('job file inputs from https URLs: memory', function () {
  this.timeout(180_000);
  const prefix = uniquePrefix('file-fetch-mem');
  const dir = mkdtempSync(path.join(os.tmpdir(), 'file-fetch-mem-'));
  const origin = new ToolServer(dir);
  let gateway: GatewayProcess | undefined;
  after(async () => {
    await gateway?.kill();
    await origin.stop();
    await cleanupPrefix(prefix);
    rmSync(dir, { recursive: true, force: true });
  });

  /** The gateway's peak resident memory so far, in bytes (Linux /proc). */
  const peakRss = (pid: number) => Number(/VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) * 1024;

  /** A 16-bit mono PCM WAV header for `dataBytes` of samples. */
  function wavHeader(dataBytes: number): Buffer {
    const h = Buffer.alloc(44);
    h.write('RIFF', 0);
    h.writeUInt32LE(36 + dataBytes, 4);
    h.write('WAVEfmt ', 8);
    h.writeUInt32LE(16, 16);
    h.writeUInt16LE(1, 20); // PCM
    h.writeUInt16LE(1, 22); // mono
    h.writeUInt32LE(16000, 24);
    h.writeUInt32LE(32000, 28);
    h.writeUInt16LE(2, 32);
    h.writeUInt16LE(16, 34);
    h.write('data', 36);
    h.writeUInt32LE(dataBytes, 40);
    return h;
  }

  /** What /<name>.wav?mb=N sent last, by name: its size and sha256. */
  const sent = new Map<string, { size: number; sha256: string }>();

  it('stages a 60 MB file from an https URL with the gateway growing by less than 20 MB', async () => {
    await origin.start();
    for (const name of ['warm', 'big']) {
      origin.handle(`/${name}.wav`, (req, res) => {
        const data = Number(new URL(req.url!, 'https://x').searchParams.get('mb')) * 1024 * 1024;
        const header = wavHeader(data);
        const hash = createHash('sha256').update(header);
        const block = Buffer.alloc(1024 * 1024, 3);
        res.writeHead(200, { 'content-type': 'audio/wav', 'content-length': String(header.length + data) });
        res.write(header);
        let written = 0;
        // Generated as it goes, so the test process holds one block, not the file.
        const pump = () => {
          while (written < data) {
            hash.update(block);
            written += block.length;
            if (!res.write(block)) return void res.once('drain', pump);
          }
          sent.set(name, { size: header.length + data, sha256: hash.digest('hex') });
          res.end();
        };
        pump();
      });
    }
    gateway = await new GatewayProcess({
      REDIS_PREFIX: prefix,
      DATA_DIR: path.join(dir, 'data'),
      OUTBOUND_CA_FILE: origin.caFile,
      OUTBOUND_ALLOW_CIDRS: '127.0.0.1/32',
      OUTBOUND_ALLOWED_PORTS: String(origin.port),
    }).start();
    const created = await fetch(`${gateway.url}/v1/admin/accounts`, { method: 'POST', headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' }, body: JSON.stringify({ name: 'mem', credits: 100 }) });
    const key = ((await created.json()) as { api_key: string }).api_key;
    const submit = async (name: string, mb: number) => {
      const res = await fetch(`${gateway!.url}/v1/jobs`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ kind: 'inference:audio:transcribe', input: { audio: origin.url(`/${name}.wav?mb=${mb}`) } }),
      });
      assert.equal(res.status, 202, await res.text());
    };
    // A first fetch brings the process to its working size for fetches (TLS and socket buffers
    // are garbage once written, collected only as V8's young generation fills): what must not
    // grow with the size of the file is measured from there, as for uploads (test/files.test.ts).
    // 32 MB, not 16: after 16 the young generation is not always at its full size yet, and the
    // growth measured then varied from 1 to 17 MB between runs; after 32 it stays under 1 MB.
    await submit('warm', 32);
    const before = peakRss(gateway.child.pid!);
    await submit('big', 60);
    const grown = peakRss(gateway.child.pid!) - before;
    const files = await fetch(`${gateway.url}/v1/files`, { headers: { authorization: `Bearer ${key}` } });
    const big = ((await files.json()) as { data: Array<{ filename: string; size: number; sha256: string; content_type: string }> }).data.find((f) => f.filename === 'big.wav')!;
    assert.deepEqual({ size: big.size, sha256: big.sha256, content_type: big.content_type }, { ...sent.get('big'), content_type: 'audio/wav' });
    assert.ok(grown < 20 * 1024 * 1024, `the gateway's peak RSS grew by ${(grown / 1048576).toFixed(1)} MB`);
  });
});
