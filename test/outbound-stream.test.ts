import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import type { ServerResponse } from 'node:http';
import os from 'node:os';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { loadConfig } from '../api/main/config.js';
import { OutboundError, SsrfGuard } from '../api/services/outbound/ssrf-guard.js';
import { sleep, until } from './helpers/harness.js';
import { ToolServer, resetConnection } from './helpers/tool-server.js';

/**
 * SsrfGuard.stream: a GET whose body is handed on as it arrives (job input files, docs/files.md),
 * with the checks of every outbound call and limits of its own on the body: bytes, pauses, a
 * deadline, the caller's signal, a connection cut short.
 */

async function failure(promise: Promise<unknown>): Promise<OutboundError> {
  const err = await promise.then(
    () => assert.fail('expected a failure'),
    (e: Error) => e,
  );
  assert.ok(err instanceof OutboundError, `expected an OutboundError, got ${err.stack}`);
  return err;
}

/** Reads `body` to its end; rejects as the body fails. */
async function drain(body: Readable): Promise<number> {
  let size = 0;
  for await (const chunk of body) size += (chunk as Buffer).length;
  return size;
}

/** Writes `size` bytes in 16 KB chunks, waiting for the socket to drain, then ends (unless `end` is false). */
async function send(res: ServerResponse, size: number, end = true): Promise<void> {
  const block = Buffer.alloc(16 * 1024, 0x61);
  for (let sent = 0; sent < size && !res.destroyed; sent += block.length) {
    if (!res.write(block.subarray(0, Math.min(block.length, size - sent)))) await new Promise((r) => res.once('drain', r));
  }
  if (end) res.end();
}

describe('SSRF guard: streamed GET', function () {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'outbound-stream-'));
  const origin = new ToolServer(dir);
  const guards: SsrfGuard[] = [];
  /** A guard that may reach the origin (its port allowed, its CA trusted, 127.0.0.1 exempt). */
  const guard = (env: Record<string, string> = {}) => {
    const g = new SsrfGuard(loadConfig({ OUTBOUND_CA_FILE: origin.caFile, OUTBOUND_ALLOW_CIDRS: '127.0.0.1/32', OUTBOUND_ALLOWED_PORTS: String(origin.port), ...env }).outbound);
    guards.push(g);
    return g;
  };

  before(async () => {
    await origin.start();
    origin.handle('/hang', () => {});
    origin.handle('/stall', (_req, res) => {
      res.writeHead(200, { 'content-length': '100000' });
      res.write(Buffer.alloc(1000, 1));
    });
    origin.handle('/reset', (req, res) => {
      res.writeHead(200, { 'content-length': '1000000' });
      void send(res, 100_000, false).then(() => resetConnection(req.socket));
    });
    origin.handle('/declared', (_req, res) => {
      res.writeHead(200, { 'content-length': String(10 * 1024 * 1024) });
      res.write('x');
    });
    origin.handle('/chunked', (req, res) => {
      res.writeHead(200);
      void send(res, Number(new URL(req.url!, 'https://x').searchParams.get('n')));
    });
    origin.handle('/dribble', (_req, res) => {
      res.writeHead(200);
      const timer = setInterval(() => res.write('.'), 50);
      res.on('close', () => clearInterval(timer));
    });
    origin.script('/moved', { status: 302, headers: { location: 'https://127.0.0.1:1/inner' } });
  });
  afterEach(() => guards.splice(0).forEach((g) => g.close()));
  after(async () => {
    await origin.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('hands the body on while the sender is still sending it, past the buffered calls\' limit', async () => {
    let finish!: () => void;
    const released = new Promise<void>((resolve) => (finish = resolve));
    origin.handle('/held', (_req, res) => {
      res.writeHead(200, { 'content-type': 'application/octet-stream' });
      // 2 MB now, the rest only once the reader has seen bytes: a guard that buffered would wait forever.
      void send(res, 2 * 1024 * 1024, false).then(() => released).then(() => send(res, 2 * 1024 * 1024));
    });
    const res = await guard({ OUTBOUND_MAX_RESPONSE: '1mb' }).stream(origin.url('/held'), { maxResponseBytes: 8 * 1024 * 1024 });
    assert.equal(res.status, 200);
    assert.equal(res.headers['content-type'], 'application/octet-stream');
    let size = 0;
    for await (const chunk of res.body) {
      size += (chunk as Buffer).length;
      finish();
    }
    assert.equal(size, 4 * 1024 * 1024);
    assert.deepEqual(origin.at('/held').map((r) => r.method), ['GET']);
  });

  it('refuses a Content-Length over the limit before reading the body', async () => {
    const err = await failure(guard().stream(origin.url('/declared'), { maxResponseBytes: 1024 * 1024 }));
    assert.equal(err.code, 'response_too_large');
  });

  it('fails the body as it passes the limit, having handed on no byte past it', async () => {
    const res = await guard().stream(origin.url('/chunked?n=300000'), { maxResponseBytes: 100_000 });
    let size = 0;
    const err = await failure(
      (async () => {
        for await (const chunk of res.body) size += (chunk as Buffer).length;
      })(),
    );
    assert.equal(err.code, 'response_too_large');
    assert.ok(size <= 100_000, `${size} bytes handed on`);
    // Exactly the limit is fine.
    assert.equal(await drain((await guard().stream(origin.url('/chunked?n=100000'), { maxResponseBytes: 100_000 })).body), 100_000);
  });

  it('times out an answer that never comes, within the policy\'s total timeout', async () => {
    const started = Date.now();
    const err = await failure(guard({ OUTBOUND_TOTAL_TIMEOUT_MS: '300' }).stream(origin.url('/hang'), { totalTimeoutMs: 60_000 }));
    assert.equal(err.code, 'timeout');
    assert.ok(Date.now() - started < 5000, 'the call\'s own longer limit does not stretch the wait for the answer');
  });

  it('times out a body that stalls after its headers', async () => {
    const res = await guard({ OUTBOUND_TOTAL_TIMEOUT_MS: '300' }).stream(origin.url('/stall'), { totalTimeoutMs: 60_000 });
    assert.equal(res.status, 200);
    const err = await failure(drain(res.body));
    assert.equal(err.code, 'timeout');
    assert.match(err.message, /paused/);
  });

  it('times out a body that keeps moving but does not end by the call\'s deadline', async () => {
    const res = await guard({ OUTBOUND_TOTAL_TIMEOUT_MS: '300' }).stream(origin.url('/dribble'), { totalTimeoutMs: 800 });
    const err = await failure(drain(res.body));
    assert.equal(err.code, 'timeout');
    assert.match(err.message, /did not end within 800 ms/);
  });

  it('does not count a slow reader as a stalled sender', async () => {
    const res = await guard({ OUTBOUND_TOTAL_TIMEOUT_MS: '200' }).stream(origin.url('/chunked?n=2000000'), { totalTimeoutMs: 60_000, maxResponseBytes: 4_000_000 });
    let size = 0;
    for await (const chunk of res.body) {
      // Longer than the pause allowed: the sender is held back by the reader, not stalled.
      if (size === 0) await sleep(600);
      size += (chunk as Buffer).length;
    }
    assert.equal(size, 2_000_000);
  });

  it('fails the body with connect_failed when the connection is reset mid-body', async () => {
    const res = await guard().stream(origin.url('/reset'));
    const err = await failure(drain(res.body));
    assert.equal(err.code, 'connect_failed');
  });

  it('fails the body with aborted on the caller\'s signal', async () => {
    const controller = new AbortController();
    const res = await guard().stream(origin.url('/stall'), { signal: controller.signal });
    const reading = drain(res.body);
    controller.abort();
    assert.equal((await failure(reading)).code, 'aborted');
    assert.equal((await failure(guard().stream(origin.url('/stall'), { signal: AbortSignal.abort() }))).code, 'aborted');
  });

  it('keeps a failure that happens while nobody reads for the next read, without crashing', async () => {
    const res = await guard({ OUTBOUND_TOTAL_TIMEOUT_MS: '300' }).stream(origin.url('/dribble'), { totalTimeoutMs: 500 });
    await until('the deadline to pass', async () => res.body.destroyed);
    assert.equal((await failure(drain(res.body))).code, 'timeout');
  });

  it('closes the connection of a body destroyed early, and reuses the one of a body read to its end', async () => {
    const g = guard();
    await drain((await g.stream(origin.url('/chunked?n=1000'))).body);
    const before = origin.connections;
    await drain((await g.stream(origin.url('/chunked?n=1000'))).body);
    assert.equal(origin.connections, before, 'kept alive and reused');
    const early = await g.stream(origin.url('/chunked?n=2000000'), { maxResponseBytes: 4_000_000 });
    early.body.destroy();
    await drain((await g.stream(origin.url('/chunked?n=1000'))).body);
    assert.equal(origin.connections, before + 1, 'the destroyed body\'s connection was not handed to the next call');
  });

  it('applies the checks of every outbound call: blocked addresses, URL rules, no redirect followed', async () => {
    const strict = guard({ OUTBOUND_ALLOW_CIDRS: '' });
    assert.equal((await failure(strict.stream(origin.url('/chunked?n=10')))).code, 'url_blocked');
    assert.equal((await failure(guard().stream(`http://127.0.0.1:${origin.port}/chunked?n=10`))).code, 'invalid_url');
    const moved = await guard().stream(origin.url('/moved'));
    assert.equal(moved.status, 302);
    assert.equal(moved.headers.location, 'https://127.0.0.1:1/inner');
    await drain(moved.body);
    assert.equal(origin.at('/inner').length, 0);
  });
});
