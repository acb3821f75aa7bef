import assert from 'node:assert/strict';
import { readFileSync, readdirSync, statSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import {
  SwitchyardApiError,
  SwitchyardAuthenticationError,
  SwitchyardBadRequestError,
  SwitchyardClient,
  SwitchyardConflictError,
  SwitchyardNetworkError,
  SwitchyardNotFoundError,
  SwitchyardStreamError,
  SwitchyardTimeoutError,
  type JobEvent,
} from '../sdk/client/index.js';
import { createDemoEngine } from '../sdk/engines/demo/index.js';
import { SwitchyardWorker, silentLogger } from '../sdk/worker/index.js';
import { CuttingProxy } from './helpers/cutting-proxy.js';
import { TestGateway, cleanupPrefix, uniquePrefix, until } from './helpers/harness.js';

const KIND = 'inference:image:generate';
/** A kind the test worker does not serve: its runs stay queued. */
const UNSERVED = 'inference:audio:sfx-generate';
const MISSING_RUN = 'run_01HZZZZZZZZZZZZZZZZZZZZZZZ';

/** A local HTTP server under the test's control (one that never answers, one that always fails...). */
async function localServer(handler: http.RequestListener): Promise<{ url: string; seen: http.IncomingHttpHeaders[]; close(): Promise<void> }> {
  const seen: http.IncomingHttpHeaders[] = [];
  const server = http.createServer((req, res) => {
    seen.push(req.headers);
    handler(req, res);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    seen,
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}

async function collect(events: AsyncIterable<JobEvent>): Promise<JobEvent[]> {
  const out: JobEvent[] = [];
  for await (const ev of events) out.push(ev);
  return out;
}

function assertConsecutive(events: JobEvent[]): void {
  const ids = events.map((e) => e.id);
  for (let i = 1; i < ids.length; i++) assert.equal(ids[i], ids[i - 1] + 1, `ids without gap or repeat: ${ids.join(',')}`);
}

describe('client library (sdk/client) against a real gateway and demo worker', () => {
  const prefix = uniquePrefix('client');
  let gw: TestGateway;
  let worker: SwitchyardWorker;
  let key: string;
  let client: SwitchyardClient;

  before(async () => {
    gw = await new TestGateway(prefix).start();
    ({ key } = await gw.account(10_000));
    const tokenToken = await gw.accountWorkerToken(key);
    // Long enough that a stream sees the run in flight (progress comes in quarter steps).
    worker = new SwitchyardWorker({ gateway: gw.url, token: tokenToken, kinds: [KIND], slots: 4, handler: createDemoEngine({ delayMs: 800 }), logger: silentLogger, progressIntervalMs: 0 });
    await worker.start();
    client = new SwitchyardClient({ baseUrl: gw.url, apiKey: key });
  });
  after(async () => {
    await worker?.stop({ timeoutMs: 0 });
    await gw?.stop();
    await cleanupPrefix(prefix);
  });

  it('submits, waits by polling and gets a job with terminal, raw and fetchable artifact URLs', async () => {
    const accepted = await client.submit({ kind: KIND, input: { prompt: 'a lighthouse' }, class: 'interactive' });
    assert.match(accepted.run_id, /^run_[0-9A-Z]{26}$/);
    assert.equal(accepted.status, 'queued');
    assert.equal(accepted.terminal, false);
    assert.equal(accepted.class, 'interactive');
    assert.equal(accepted.raw.run_id, accepted.run_id);
    assert.equal('terminal' in accepted.raw, false, 'raw is the 202 exactly as sent');

    const done = await client.wait(accepted.run_id, { intervalMs: 50, timeoutMs: 15_000 });
    assert.equal(done.status, 'succeeded');
    assert.equal(done.terminal, true);
    assert.equal(done.raw.terminal, true);
    assert.ok(done.output && done.output.urls.length > 0);
    const png = await fetch(done.output.urls[0]);
    assert.equal(png.status, 200);
    assert.equal(png.headers.get('content-type'), 'image/png');

    const again = await client.get(accepted.run_id);
    assert.deepEqual(again.raw, done.raw);
    assert.deepEqual(again.output, done.output);
  });

  it("get(runId, { include: ['input'] }) gives the job's input exactly; without it there is none", async () => {
    const input = { prompt: 'a lighthouse', width: 96, height: 64, seed: 7, style: { palette: ['teal', 'amber'], strength: 0.5 } };
    const accepted = await client.submit({ kind: KIND, input });
    const withInput = await client.get(accepted.run_id, { include: ['input'] });
    assert.deepEqual(withInput.input, input);
    assert.deepEqual(withInput.raw.input, input);
    const plain = await client.get(accepted.run_id);
    assert.equal('input' in plain.raw, false, 'asked for nothing, the job object carries no input');
    assert.equal(plain.input, undefined);
  });

  it('submit with wait answers with the finished job when the run ends in time, else with the queued one', async () => {
    const finished = await client.submit({ kind: KIND, input: { prompt: 'waited for' } }, { wait: 30 });
    assert.equal(finished.terminal, true);
    assert.equal(finished.status, 'succeeded');
    assert.ok(finished.output && finished.output.urls.length > 0);
    assert.deepEqual(finished.raw, (await client.get(finished.run_id)).raw);

    const queued = await client.submit({ kind: UNSERVED, input: { prompt: 'a door creaks' } }, { wait: 1 });
    assert.equal(queued.terminal, false);
    assert.equal(queued.status, 'queued');
    await client.cancel(queued.run_id);
  });

  it("lists a run's webhook attempts (none without a webhook); 404 for an unknown run", async () => {
    const run = await client.submit({ kind: UNSERVED, input: { prompt: 'a door creaks' } });
    assert.deepEqual(await client.webhooks(run.run_id), []);
    await assert.rejects(client.webhooks(MISSING_RUN), SwitchyardNotFoundError);
    await client.cancel(run.run_id);
  });

  it('lists newest first with a cursor, and replays an idempotent submission', async () => {
    const body = { kind: UNSERVED, input: { prompt: 'a door creaks' } };
    const first = await client.submit(body, { idempotencyKey: `idem-${prefix}` });
    const replay = await client.submit(body, { idempotencyKey: `idem-${prefix}` });
    assert.equal(replay.run_id, first.run_id);
    const second = await client.submit(body);
    const page1 = await client.list({ kind: UNSERVED, limit: 1 });
    assert.equal(page1.data.length, 1);
    assert.equal(page1.data[0].run_id, second.run_id);
    assert.equal(page1.data[0].terminal, false);
    assert.ok(page1.next_cursor);
    const page2 = await client.list({ kind: UNSERVED, limit: 1, cursor: page1.next_cursor! });
    assert.equal(page2.data[0].run_id, first.run_id);
    const queued = await client.list({ status: 'queued', kind: UNSERVED });
    assert.deepEqual(queued.data.map((j) => j.run_id).sort(), [first.run_id, second.run_id].sort());
    for (const j of queued.data) await client.cancel(j.run_id);
  });

  it('cancels a queued run; a second cancel is a typed 409 with the envelope', async () => {
    const run = await client.submit({ kind: UNSERVED, input: { prompt: 'a door creaks' } });
    const canceled = await client.cancel(run.run_id);
    assert.equal(canceled.status, 'canceled');
    assert.equal(canceled.terminal, true);
    const err = await client.cancel(run.run_id).catch((e: unknown) => e);
    assert.ok(err instanceof SwitchyardConflictError, String(err));
    assert.ok(err instanceof SwitchyardApiError);
    assert.equal(err.status, 409);
    assert.equal(err.code, 'already_terminal');
    assert.equal((err.body as any).error.code, 'already_terminal');
    assert.equal(err.message, (err.body as any).error.message);
    assert.match(err.requestId ?? '', /\S/);
  });

  it('wait() past its overall timeout throws a timeout error that carries the run id', async () => {
    const run = await client.submit({ kind: UNSERVED, input: { prompt: 'a door creaks' } });
    const err = await client.wait(run.run_id, { intervalMs: 20, timeoutMs: 300 }).catch((e: unknown) => e);
    assert.ok(err instanceof SwitchyardTimeoutError, String(err));
    assert.equal(err.runId, run.run_id);
    assert.equal(err.timeoutMs, 300);
    assert.equal(err.lastJob?.status, 'queued');
    assert.match(err.message, new RegExp(run.run_id));
    assert.equal((await client.get(run.run_id)).status, 'queued', 'the run itself is untouched');
    await client.cancel(run.run_id);
  });

  it('throws typed errors with the envelope for 401, 400 and 404', async () => {
    const bad = new SwitchyardClient({ baseUrl: gw.url, apiKey: 'sy_live_not_a_real_key' });
    const unauthorized = await bad.get(MISSING_RUN).catch((e: unknown) => e);
    assert.ok(unauthorized instanceof SwitchyardAuthenticationError, String(unauthorized));
    assert.equal(unauthorized.status, 401);
    assert.equal(unauthorized.code, 'unauthorized');
    assert.deepEqual(Object.keys((unauthorized.body as any).error).sort().slice(0, 2), ['code', 'message']);

    const invalid = await client.submit({ kind: KIND, input: { prompt: 7 } }).catch((e: unknown) => e);
    assert.ok(invalid instanceof SwitchyardBadRequestError, String(invalid));
    assert.equal(invalid.code, 'invalid_request');
    assert.ok(invalid.details, 'the ajv errors are in details');
    assert.deepEqual(invalid.details, (invalid.body as any).error.details);

    const unknownKind = await client.submit({ kind: 'inference:nope', input: {} }).catch((e: unknown) => e);
    assert.ok(unknownKind instanceof SwitchyardBadRequestError);
    assert.equal(unknownKind.code, 'unknown_kind');

    const missing = await client.get(MISSING_RUN).catch((e: unknown) => e);
    assert.ok(missing instanceof SwitchyardNotFoundError, String(missing));
    assert.equal(missing.status, 404);
    assert.equal(missing.name, 'SwitchyardNotFoundError');
    assert.equal(missing.code, 'not_found');
    assert.match(missing.requestId ?? '', /\S/, 'the X-Request-Id of the answer');
  });

  it('reads capabilities and capacity, the latter without a key', async () => {
    const caps = await client.capabilities();
    const image = caps.kinds.find((k) => k.kind === KIND);
    assert.ok(image);
    assert.ok(image.workers >= 1);
    assert.equal(image.workers_by_tier.open, image.workers);
    assert.equal(typeof image.input_schema, 'object');
    const capacity = await new SwitchyardClient({ baseUrl: gw.url }).capacity();
    assert.ok(capacity.workers.total >= 1);
    assert.ok(capacity.by_kind.some((k) => k.kind === KIND));
  });

  it('streams a run from status to done, and resumes after a given event id', async () => {
    const run = await client.submit({ kind: KIND, input: { prompt: 'streamed' } });
    const events = await collect(client.stream(run.run_id));
    assert.equal(events[0].event, 'status');
    assert.equal(events.at(-1)!.event, 'done');
    assertConsecutive(events);
    const progress = events.filter((e) => e.event === 'progress');
    assert.ok(progress.length >= 3, `progress events: ${JSON.stringify(events)}`);
    for (const p of progress) if (p.event === 'progress') assert.ok(p.data.progress >= 0 && p.data.progress <= 1);
    const done = events.at(-1)!;
    assert.ok(done.event === 'done');
    assert.equal(done.data.terminal, true);
    assert.equal(done.data.status, 'succeeded');
    assert.deepEqual(done.data.raw, (await client.get(run.run_id)).raw);

    // Resuming after an id yields exactly the events after it.
    const from = events[1].id;
    const resumed = await collect(client.stream(run.run_id, { lastEventId: from }));
    assert.deepEqual(
      resumed.map((e) => [e.id, e.event]),
      events.filter((e) => e.id > from).map((e) => [e.id, e.event]),
    );

    // A run already over: status, then done, then the end.
    const late = await collect(client.stream(run.run_id));
    assert.deepEqual(late.map((e) => e.event), ['status', 'done']);
  });

  it('stream() reconnects with Last-Event-ID after the connection is cut mid-frame: no gap, no duplicate', async () => {
    const proxy = new CuttingProxy(Number(new URL(gw.url).port), 'first');
    const proxied = new SwitchyardClient({ baseUrl: await proxy.start(), apiKey: key });
    try {
      const run = await client.submit({ kind: KIND, input: { prompt: 'cut me' } });
      const events = await collect(proxied.stream(run.run_id, { reconnectDelayMs: 10 }));
      assert.equal(proxy.cuts, 1, 'the proxy cut the stream');
      assert.ok(proxy.eventConnections >= 2, 'the client connected again');
      assert.doesNotMatch(proxy.eventRequests[0], /last-event-id/);
      assert.match(proxy.eventRequests[1], /\r\nlast-event-id: \d+/);
      assert.equal(events[0].event, 'status');
      assert.equal(events.at(-1)!.event, 'done');
      assertConsecutive(events);
      assert.ok(events.some((e) => e.event === 'progress'), 'the progress frame that was cut arrived whole after the reconnect');
      // The same events as an uncut replay of the log after the first one.
      const replay = await collect(client.stream(run.run_id, { lastEventId: events[0].id }));
      assert.deepEqual(
        events.slice(1).map((e) => [e.id, e.event, e.event === 'progress' ? e.data : null]),
        replay.map((e) => [e.id, e.event, e.event === 'progress' ? e.data : null]),
      );
    } finally {
      await proxy.stop();
    }
  });

  it('leaving a stream early closes its connection', async () => {
    const proxy = new CuttingProxy(Number(new URL(gw.url).port), 'none');
    const proxied = new SwitchyardClient({ baseUrl: await proxy.start(), apiKey: key });
    try {
      const run = await client.submit({ kind: UNSERVED, input: { prompt: 'a door creaks' } });
      for await (const ev of proxied.stream(run.run_id)) {
        assert.equal(ev.event, 'status');
        break;
      }
      assert.equal(proxy.eventConnections, 1);
      await until('the events connection to close', async () => proxy.openEvents.size === 0);
      await client.cancel(run.run_id);
    } finally {
      await proxy.stop();
    }
  });

  it('stream() stops at once on a 4xx and after maxReconnects on repeated 5xx', async () => {
    const missing = await collect(client.stream(MISSING_RUN)).catch((e: unknown) => e);
    assert.ok(missing instanceof SwitchyardNotFoundError, String(missing));

    const failing = await localServer((_req, res) => res.writeHead(503, { 'content-type': 'application/json' }).end('{"error":{"code":"unavailable","message":"down"}}'));
    try {
      const c = new SwitchyardClient({ baseUrl: failing.url, apiKey: 'k' });
      const err = await collect(c.stream(MISSING_RUN, { maxReconnects: 2, reconnectDelayMs: 1, lastEventId: 4 })).catch((e: unknown) => e);
      assert.ok(err instanceof SwitchyardStreamError, String(err));
      assert.equal(err.runId, MISSING_RUN);
      assert.equal(err.lastEventId, 4);
      assert.equal(failing.seen.length, 3, 'the first try and two reconnects');
      for (const h of failing.seen) {
        assert.equal(h['last-event-id'], '4');
        assert.equal(h.accept, 'text/event-stream');
        assert.equal(h.authorization, 'Bearer k');
      }
    } finally {
      await failing.close();
    }
  });
});

describe('client library: timeouts, aborts and the network', () => {
  let silent: Awaited<ReturnType<typeof localServer>>;
  before(async () => {
    silent = await localServer(() => {
      // never answers
    });
  });
  after(async () => silent.close());

  it('times out a request with the client default or a per-call override', async () => {
    const c = new SwitchyardClient({ baseUrl: silent.url, apiKey: 'k', timeoutMs: 100 });
    const byDefault = await c.get(MISSING_RUN).catch((e: unknown) => e);
    assert.ok(byDefault instanceof SwitchyardTimeoutError, String(byDefault));
    assert.equal(byDefault.timeoutMs, 100);
    assert.equal(byDefault.runId, undefined);

    const noDefault = new SwitchyardClient({ baseUrl: silent.url, apiKey: 'k', timeoutMs: 0 });
    const perCall = await noDefault.capabilities({ timeoutMs: 50 }).catch((e: unknown) => e);
    assert.ok(perCall instanceof SwitchyardTimeoutError, String(perCall));
    assert.equal(perCall.timeoutMs, 50);
  });

  it("a caller's abort is an AbortError, not a timeout", async () => {
    const c = new SwitchyardClient({ baseUrl: silent.url, apiKey: 'k' });
    const ac = new AbortController();
    const p = c.get(MISSING_RUN, { signal: ac.signal }).catch((e: unknown) => e);
    ac.abort();
    const err = (await p) as Error;
    assert.equal(err.name, 'AbortError');
    assert.ok(!(err instanceof SwitchyardTimeoutError));
  });

  it('sends the bearer key, Idempotency-Key and Prefer: wait', async () => {
    const echo = await localServer((_req, res) =>
      res.writeHead(202, { 'content-type': 'application/json' }).end(JSON.stringify({ run_id: MISSING_RUN, kind: KIND, status: 'queued', confidentiality: 'open', class: 'standard', priority: 20, created_at: new Date().toISOString() })),
    );
    try {
      const c = new SwitchyardClient({ baseUrl: `${echo.url}/`, apiKey: 'sy_key' });
      const job = await c.submit({ kind: KIND, input: { prompt: 'x' } }, { idempotencyKey: 'abc', wait: 5 });
      assert.equal(job.run_id, MISSING_RUN);
      assert.equal(job.terminal, false);
      assert.equal(echo.seen[0].authorization, 'Bearer sy_key');
      assert.equal(echo.seen[0]['idempotency-key'], 'abc');
      assert.equal(echo.seen[0].prefer, 'wait=5');
      assert.equal(echo.seen[0]['content-type'], 'application/json');
    } finally {
      await echo.close();
    }
  });

  it('a refused connection is a SwitchyardNetworkError; a non-JSON error page keeps its status', async () => {
    const gone = await localServer(() => {});
    const url = gone.url;
    await gone.close();
    const refused = await new SwitchyardClient({ baseUrl: url, apiKey: 'k' }).get(MISSING_RUN).catch((e: unknown) => e);
    assert.ok(refused instanceof SwitchyardNetworkError, String(refused));

    const html = await localServer((_req, res) => res.writeHead(502, { 'content-type': 'text/html' }).end('<h1>Bad gateway</h1>'));
    try {
      const err = await new SwitchyardClient({ baseUrl: html.url, apiKey: 'k' }).get(MISSING_RUN).catch((e: unknown) => e);
      assert.ok(err instanceof SwitchyardApiError, String(err));
      assert.equal(err.status, 502);
      assert.equal(err.code, 'invalid_response');
      assert.equal(err.body, '<h1>Bad gateway</h1>');
      assert.equal(err.retryable, true);
    } finally {
      await html.close();
    }
  });
});

describe('client library: no server code', () => {
  // The client may use its own files and the shared attestation checks (sdk/attestation),
  // which are browser-safe too; packages: eventsource-parser and jose.
  const roots = [path.resolve('sdk/client'), path.resolve('sdk/attestation')];
  // The sources: the package's build output (dist/, api/bin/build.mjs) is read by the package tests (test/client-package.test.ts).
  const files = (dir: string): string[] =>
    readdirSync(dir).flatMap((name) => {
      const p = path.join(dir, name);
      if (name === 'dist' || name === 'node_modules') return [];
      return statSync(p).isDirectory() ? files(p) : p.endsWith('.ts') ? [p] : [];
    });

  it('imports only its own files, sdk/attestation, eventsource-parser and jose, and uses no Node-only globals', () => {
    const all = roots.flatMap(files);
    assert.ok(all.some((f) => f.endsWith(path.join('client', 'index.ts'))));
    for (const file of all) {
      const src = readFileSync(file, 'utf8');
      const specifiers = [...src.matchAll(/(?:^|\s)(?:import|export)\s[^;]*?from\s*['"]([^'"]+)['"]|import\(\s*['"]([^'"]+)['"]\s*\)|^import\s+['"]([^'"]+)['"]/gm)].map((m) => m[1] ?? m[2] ?? m[3]);
      for (const spec of specifiers) {
        if (spec.startsWith('.')) {
          const target = path.resolve(path.dirname(file), spec.replace(/\.js$/, '.ts'));
          assert.ok(roots.some((r) => target.startsWith(r + path.sep)), `${path.relative('.', file)} imports ${spec}, outside sdk/client and sdk/attestation`);
          assert.ok(all.includes(target), `${path.relative('.', file)} imports ${spec}, which is not a file there`);
        } else {
          assert.ok(['eventsource-parser', 'jose'].includes(spec), `${path.relative('.', file)} imports ${spec}`);
        }
      }
      assert.doesNotMatch(src, /\b(require\(|process\.|Buffer\b|__dirname)/, `${path.relative('.', file)} uses a Node-only global`);
    }
  });

  it('names a Node module only in local-file.ts, loaded lazily for path uploads (browsers never load it)', () => {
    const all = roots.flatMap(files);
    const naming = all.filter((f) => /['"]node:/.test(readFileSync(f, 'utf8')));
    assert.deepEqual(naming.map((f) => path.relative('.', f)), [path.join('sdk', 'client', 'local-file.ts')]);
    const src = readFileSync(naming[0], 'utf8');
    assert.doesNotMatch(src, /^\s*import\s[^;]*['"]node:/m, 'no static import of it');
    assert.match(src, /await import\(/);
  });
});
