import assert from 'node:assert/strict';
import net from 'node:net';
import { TestGateway, cleanupPrefix, errorCode, uniquePrefix } from './helpers/harness.js';

describe('HTTP layer', () => {
  const prefix = uniquePrefix('http');
  const gw = new TestGateway(prefix, { JSON_BODY_LIMIT: '64kb' });
  let key: string;
  before(async () => {
    await gw.start();
    key = (await gw.account()).key;
  });
  after(async () => {
    await gw.stop();
    await cleanupPrefix(prefix);
  });

  it('gives every response an X-Request-Id, echoing a safe caller id', async () => {
    const own = await gw.request('GET', '/healthz', { headers: { 'x-request-id': 'trace-42.abc' } });
    assert.equal(own.headers.get('x-request-id'), 'trace-42.abc');
    const fresh = await gw.request('GET', '/nope');
    assert.match(fresh.headers.get('x-request-id') ?? '', /^[0-9a-f-]{36}$/);
    const unsafe = await gw.request('GET', '/healthz', { headers: { 'x-request-id': 'a b<script>' } });
    assert.notEqual(unsafe.headers.get('x-request-id'), 'a b<script>');
  });

  it('answers unknown routes with 404 not_found', async () => {
    const res = await gw.request('GET', '/v2/jobs');
    assert.equal(res.status, 404);
    assert.equal(errorCode(res), 'not_found');
  });

  it('answers a wrong method with 405 and Allow', async () => {
    const res = await gw.request('DELETE', '/v1/jobs', { key });
    assert.equal(res.status, 405);
    assert.equal(errorCode(res), 'method_not_allowed');
    assert.match(res.headers.get('allow') ?? '', /GET/);
  });

  it('answers a body over the configured limit with 413 payload_too_large', async () => {
    const res = await gw.submit(key, { kind: 'inference:image:generate', input: { prompt: 'x'.repeat(70 * 1024) } });
    assert.equal(res.status, 413);
    assert.equal(errorCode(res), 'payload_too_large');
  });

  // 11 MB (past the limit) written in full before the answer is read, as most HTTP clients do
  // (python's http.client, requests, ...): the gateway answers first and closes only after the
  // caller stopped sending, so no RST throws the unread answer away (EPIPE instead of a 413).
  for (const framing of ['Transfer-Encoding: chunked', 'Content-Length'] as const) {
    it(`answers an oversized body (${framing}) with 413 payload_too_large that a caller still writing can read`, async () => {
      const url = new URL(gw.url);
      const total = 11 * 1024 * 1024;
      const chunked = framing !== 'Content-Length';
      const reply = await new Promise<string>((resolve, reject) => {
        const socket = net.connect(Number(url.port), url.hostname);
        let text = '';
        socket.setEncoding('latin1');
        socket.on('data', (d) => (text += d));
        socket.on('error', (err) => reject(new Error(`${err.message} after reading ${JSON.stringify(text.slice(0, 80))}`)));
        socket.on('end', () => resolve(text));
        socket.on('connect', async () => {
          // Read nothing until the whole body is written.
          socket.pause();
          const write = (data: string | Buffer) => (socket.write(data) ? undefined : new Promise((r) => socket.once('drain', r)));
          await write(`POST /v1/jobs HTTP/1.1\r\nHost: ${url.host}\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\n${chunked ? framing : `Content-Length: ${total}`}\r\n\r\n`);
          const chunk = Buffer.alloc(64 * 1024, 0x20);
          const head = Buffer.from(`${chunk.length.toString(16)}\r\n`);
          for (let sent = 0; sent < total; sent += chunk.length) await write(chunked ? Buffer.concat([head, chunk, Buffer.from('\r\n')]) : chunk);
          socket.end(chunked ? '0\r\n\r\n' : '');
          socket.resume();
        });
      });
      assert.match(reply, /^HTTP\/1\.1 413 /);
      assert.match(reply, /\r\nconnection: close\r\n/i);
      assert.equal(JSON.parse(reply.slice(reply.indexOf('\r\n\r\n') + 4)).error.code, 'payload_too_large');
    });
  }

  it('answers a non-JSON body with 415 unsupported_media_type', async () => {
    const res = await gw.request('POST', '/v1/jobs', { key, raw: 'kind=x', headers: { 'content-type': 'application/x-www-form-urlencoded' } });
    assert.equal(res.status, 415);
    assert.equal(errorCode(res), 'unsupported_media_type');
  });

  it('answers broken JSON with 400 invalid_request and no internals', async () => {
    const res = await gw.request('POST', '/v1/jobs', { key, raw: '{"kind": "inference:image:generate", "input": {', headers: { 'content-type': 'application/json' } });
    assert.equal(res.status, 400);
    assert.equal(errorCode(res), 'invalid_request');
    assert.doesNotMatch(res.text, /at \w|node_modules|\.ts:/);
  });

  it('answers 503 unavailable, not 500, and recovers, when Redis goes away', async () => {
    // Point a second gateway's request connection at a dead port by disconnecting it.
    const p = uniquePrefix('http-down');
    const other = await new TestGateway(p).start();
    try {
      const { key: k } = await other.account();
      other.redis.disconnect(false);
      const res = await other.request('GET', '/v1/account', { key: k });
      assert.equal(res.status, 503);
      assert.equal(errorCode(res), 'unavailable');
      const ready = await other.request('GET', '/readyz');
      assert.equal(ready.status, 503);
      assert.equal((await other.request('GET', '/healthz')).status, 200, 'alive, just not ready');
      other.redis.connect().catch(() => {});
      await new Promise((r) => setTimeout(r, 300));
      assert.equal((await other.request('GET', '/readyz')).status, 200);
    } finally {
      await other.stop();
      await cleanupPrefix(p);
    }
  });
});

describe('error rendering', () => {
  it('turns an unexpected exception into 500 internal without any internals', async () => {
    const { renderError } = await import('../api/http/middleware/error-handler.js');
    const { toApiError } = await import('../models/errors.js');
    const ctx = { status: 200, body: undefined as unknown, headers: {} as Record<string, string>, state: { requestId: 'r' }, set(k: string, v: string) { this.headers[k] = v; } };
    renderError(ctx, toApiError(new TypeError("Cannot read properties of undefined (reading 'x') at /work/main/api/x.ts:3")));
    assert.equal(ctx.status, 500);
    assert.deepEqual(ctx.body, { error: { code: 'internal', message: 'internal error' } });
  });

  it("answers 503 unavailable with Retry-After for a Redis Cluster's slot moving under a command (MOVED, ASK, TRYAGAIN, CLUSTERDOWN)", async () => {
    const { toApiError } = await import('../models/errors.js');
    const { ReplyError } = await import('ioredis');
    for (const reply of ['MOVED 9440 127.0.0.1:44589', 'ASK 12 10.0.0.7:6380', 'TRYAGAIN Multiple keys request during rehashing of slot', 'CLUSTERDOWN The cluster is down']) {
      const err = toApiError(new ReplyError(reply));
      assert.equal(err.status, 503, reply);
      assert.equal(err.headers?.['Retry-After'], '1', reply);
    }
    // Only a redirection's shape: a message that merely says "moved" is no outage.
    assert.equal(toApiError(new Error('the file was moved 3 times')).status, 500);
  });
});
