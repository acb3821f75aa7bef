import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import type { ServerResponse } from 'node:http';
import os from 'node:os';
import path from 'node:path';
import WebSocket from 'ws';
import { partialUploadsUnder } from './helpers/artifact-files.js';
import { TestGateway, cleanupPrefix, uniquePrefix, until } from './helpers/harness.js';
import { samplePng } from './helpers/sample-files.js';
import { ToolServer } from './helpers/tool-server.js';

/**
 * A caller that hangs up while the gateway fetches an https input of its job (docs/files.md) gets
 * no run: the fetch is cut at once, and nothing is left for a caller who is gone: no run, no
 * credits reserved, nothing queued, no file, and its Idempotency-Key is free for the retry.
 * Through POST /v1/jobs, with `Prefer: wait`, and the callers' WebSocket `submit`.
 */

const PRICE = 20; // inference:3d:image-to-mesh
const CREDITS = 100;
/** Far beyond the test: a fetch the caller's leaving did not cut would still be running at its end. */
const FETCH_MS = 120_000;

/** A PNG's first bytes (enough to be typed as one), padded with zeros to `size`. */
const pngOf = (size: number) => Buffer.concat([samplePng(8), Buffer.alloc(Math.max(0, size - samplePng(8).length))]);

/** Resolves with `promise`, or fails naming `what` once `ms` have passed (a deadline, not a timing assertion). */
function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout;
  const late = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`${what} within ${ms} ms`)), ms)));
  return Promise.race([promise, late]).finally(() => clearTimeout(timer));
}

describe('a caller that hangs up while an https input is fetched', function () {
  this.timeout(60_000);
  const prefix = uniquePrefix('caller-gone');
  const dir = mkdtempSync(path.join(os.tmpdir(), 'caller-gone-'));
  const artifacts = path.join(dir, 'data', 'artifacts');
  const origin = new ToolServer(dir);
  let gw: TestGateway;
  /** By path: when the first answer's connection closed. Later requests get the whole file. */
  const held = new Map<string, Promise<void>>();

  before(async () => {
    await origin.start();
    gw = await new TestGateway(prefix, {
      OUTBOUND_CA_FILE: origin.caFile,
      OUTBOUND_ALLOW_CIDRS: '127.0.0.1/32',
      OUTBOUND_ALLOWED_PORTS: String(origin.port),
      FILE_FETCH_TIMEOUT_MS: String(FETCH_MS),
      DATA_DIR: path.join(dir, 'data'),
      // The filesystem store, whatever the run's storage: these tests watch its files being written.
      STORAGE: 'fs',
    }).start();
  });
  after(async () => {
    await gw?.stop();
    await origin.stop();
    await cleanupPrefix(prefix);
    rmSync(dir, { recursive: true, force: true });
  });

  /**
   * An image at `pathname` whose first answer sends its headers and 16 KB, then a byte every
   * 100 ms and never ends: a long fetch that never pauses long enough to time out.
   */
  function slowImage(pathname: string): string {
    origin.handle(pathname, (_req, res: ServerResponse) => {
      if (held.has(pathname)) return void res.writeHead(200, { 'content-type': 'image/png' }).end(pngOf(16 * 1024));
      held.set(pathname, new Promise((resolve) => res.once('close', () => resolve())));
      res.writeHead(200, { 'content-type': 'image/png' });
      res.write(pngOf(16 * 1024));
      const timer = setInterval(() => res.write('.'), 100);
      res.once('close', () => clearInterval(timer));
    });
    return origin.url(pathname);
  }

  /** The partial uploads in the artifact store (a fetch being stored has one). */
  const partials = () => partialUploadsUnder(artifacts);

  /** Waits until the gateway is storing the fetch's body, then hangs up with `hangUp`; resolves once the origin saw its connection close. */
  async function hangUpMidFetch(pathname: string, hangUp: () => void): Promise<void> {
    await until('the gateway storing the fetched body', async () => held.has(pathname) && partials().length > 0);
    hangUp();
    await within(held.get(pathname)!, 10_000, "the origin's connection closed after the caller hung up");
  }

  /** No run, credits whole, nothing queued, no file or partial bytes; resolves once the submission let go of `idempotencyKey`. */
  async function assertNothingCreated(acct: { id: string; key: string }, idempotencyKey: string): Promise<void> {
    const claim = gw.gateway.core.keys.idempotency(acct.id, idempotencyKey);
    await until('the Idempotency-Key released', async () => (await gw.redis.exists(claim)) === 0);
    assert.deepEqual((await gw.request('GET', '/v1/jobs', { key: acct.key })).body.data, []);
    const account = (await gw.request('GET', '/v1/account', { key: acct.key })).body;
    assert.deepEqual({ credits: account.credits, reserved: account.reserved }, { credits: CREDITS, reserved: 0 });
    const queued = await Promise.all((await gw.queues.known()).map((q) => q.getJobs(['waiting', 'prioritized', 'delayed'])));
    assert.deepEqual(queued.flat().filter((j) => j?.data.account_id === acct.id), [], 'nothing queued');
    assert.deepEqual((await gw.request('GET', '/v1/files', { key: acct.key })).body.data, []);
    assert.equal(await gw.stores.files.usedBytes(acct.id), 0);
    assert.deepEqual(partials(), [], 'no partial upload left');
  }

  /** The same request again, the image now served whole: a new run, not a replay of anything. */
  async function assertRetryCreates(acct: { id: string; key: string }, body: unknown, idempotencyKey: string): Promise<void> {
    const retry = await gw.submit(acct.key, body, { 'idempotency-key': idempotencyKey });
    assert.equal(retry.status, 202, retry.text);
    assert.equal(retry.headers.get('idempotent-replayed'), null);
    assert.equal((await gw.request('GET', '/v1/jobs', { key: acct.key })).body.data.length, 1);
    assert.equal((await gw.request('GET', '/v1/account', { key: acct.key })).body.reserved, PRICE);
  }

  for (const prefer of [undefined, 'wait=30']) {
    it(`POST /v1/jobs${prefer ? ` with Prefer: ${prefer}` : ''}: the fetch is cut and nothing is created`, async () => {
      const acct = await gw.account(CREDITS, 'gone');
      const body = { kind: 'inference:3d:image-to-mesh', input: { image: slowImage(`/http-${prefer ? 'wait' : 'plain'}.png`) } };
      const idempotencyKey = `gone-${prefer ?? 'plain'}`;
      const caller = new AbortController();
      const submitted = fetch(`${gw.url}/v1/jobs`, {
        method: 'POST',
        headers: { authorization: `Bearer ${acct.key}`, 'content-type': 'application/json', 'idempotency-key': idempotencyKey, ...(prefer ? { prefer } : {}) },
        body: JSON.stringify(body),
        signal: caller.signal,
      }).catch((err: Error) => err);
      await hangUpMidFetch(new URL(body.input.image).pathname, () => caller.abort());
      assert.equal(((await submitted) as Error).name, 'AbortError');
      await assertNothingCreated(acct, idempotencyKey);
      await assertRetryCreates(acct, body, idempotencyKey);
    });
  }

  it('a WebSocket submit whose socket closes: the fetch is cut and nothing is created', async () => {
    const acct = await gw.account(CREDITS, 'gone-ws');
    const body = { kind: 'inference:3d:image-to-mesh', input: { image: slowImage('/ws.png') } };
    const idempotencyKey = 'gone-ws';
    const ws = new WebSocket(`${gw.url.replace(/^http/, 'ws')}/v1/ws`, { headers: { authorization: `Bearer ${acct.key}` } });
    await new Promise((resolve, reject) => ws.once('open', resolve).once('error', reject));
    ws.send(JSON.stringify({ type: 'submit', id: 1, idempotency_key: idempotencyKey, ...body }));
    await hangUpMidFetch('/ws.png', () => ws.terminate());
    await assertNothingCreated(acct, idempotencyKey);
    await assertRetryCreates(acct, body, idempotencyKey);
  });
});
