import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import WebSocket from 'ws';
import { KIND_NAMES, TIERS } from '../models/kinds.js';
import { createDemoEngine } from '../sdk/engines/demo/index.js';
import type { Engine } from '../sdk/engines/types.js';
import { silentLogger } from '../sdk/worker/logger.js';
import { SwitchyardWorker } from '../sdk/worker/switchyard-worker.js';
import { MODEL_ID_PATTERN } from '../sdk/protocol/index.js';
import { Exposition } from './helpers/exposition.js';
import { ADMIN_TOKEN, TestGateway, cleanupPrefix, errorCode, uniquePrefix, until } from './helpers/harness.js';
import { RawWorker } from './helpers/raw-worker.js';
import { SseClient } from './helpers/sse-client.js';
import { ToolServer } from './helpers/tool-server.js';

const IMAGE = 'inference:image:generate';
const SFX = 'inference:audio:sfx-generate';
const VIDEO = 'inference:video:generate';
const MUSIC = 'inference:audio:music-generate';
const MESH = 'inference:3d:text-to-mesh';
const RIG = 'inference:rig';

/** The metric families agreed with the dashboards (docs/operations.md), with their type and labels. */
const AGREED: Record<string, { type: string; labels: string[] }> = {
  switchyard_http_request_duration_seconds: { type: 'histogram', labels: ['method', 'route', 'status_class'] },
  switchyard_jobs_submitted_total: { type: 'counter', labels: ['kind', 'tier'] },
  switchyard_jobs_succeeded_total: { type: 'counter', labels: ['kind', 'tier'] },
  switchyard_jobs_failed_total: { type: 'counter', labels: ['kind', 'tier'] },
  switchyard_jobs_canceled_total: { type: 'counter', labels: ['kind', 'tier'] },
  switchyard_queue_jobs: { type: 'gauge', labels: ['kind', 'tier', 'state'] },
  switchyard_model_jobs: { type: 'gauge', labels: ['kind', 'model', 'state'] },
  switchyard_model_jobs_without_worker: { type: 'gauge', labels: ['kind', 'model'] },
  switchyard_job_wait_seconds: { type: 'histogram', labels: ['kind', 'tier'] },
  switchyard_job_run_seconds: { type: 'histogram', labels: ['kind', 'tier', 'status'] },
  switchyard_dispatch_latency_seconds: { type: 'histogram', labels: ['kind', 'tier'] },
  switchyard_leases_lost_total: { type: 'counter', labels: ['reason'] },
  switchyard_jobs_requeued_total: { type: 'counter', labels: ['kind', 'tier'] },
  switchyard_workers_connected: { type: 'gauge', labels: ['kind', 'tier'] },
  switchyard_worker_slots: { type: 'gauge', labels: ['tier', 'state'] },
  switchyard_sse_connections: { type: 'gauge', labels: [] },
  switchyard_websocket_connections: { type: 'gauge', labels: ['surface'] },
  switchyard_webhook_deliveries_total: { type: 'counter', labels: ['outcome'] },
  switchyard_tool_calls_total: { type: 'counter', labels: ['outcome'] },
  switchyard_credits_reserved_total: { type: 'counter', labels: ['kind'] },
  switchyard_credits_charged_total: { type: 'counter', labels: ['kind'] },
  switchyard_pipelines_formed_total: { type: 'counter', labels: ['kind', 'tier'] },
  switchyard_pipelines_ended_total: { type: 'counter', labels: ['end'] },
  switchyard_pipeline_forwarded_bytes_total: { type: 'counter', labels: ['path'] },
  switchyard_redis_replica_wait_seconds: { type: 'histogram', labels: ['step'] },
  switchyard_redis_replica_shortfalls_total: { type: 'counter', labels: ['step'] },
};

/** Every value a label may take; anything else (an id, a raw path, a message) is a cardinality leak. */
const ENUMS: Record<string, (v: string) => boolean> = {
  kind: (v) => KIND_NAMES.includes(v),
  tier: (v) => (TIERS as readonly string[]).includes(v),
  method: (v) => ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS', 'other'].includes(v),
  route: (v) => v === 'unmatched' || /^\/[a-z0-9/_.{}-]*$/.test(v),
  status_class: (v) => ['1xx', '2xx', '3xx', '4xx', '5xx'].includes(v),
  state: (v) => ['waiting', 'prioritized', 'delayed', 'active', 'busy', 'free', 'unavailable', 'queued', 'running'].includes(v),
  // Bounded by the model catalogue (declared or advertised ids), never by what callers send.
  model: (v) => new RegExp(MODEL_ID_PATTERN).test(v),
  status: (v) => ['succeeded', 'failed', 'canceled'].includes(v),
  reason: (v) => ['disconnect', 'heartbeat', 'gateway_lost', 'shutdown'].includes(v),
  surface: (v) => ['caller', 'worker', 'bot'].includes(v),
  outcome: (v) => ['delivered', 'retrying', 'gave_up', 'failed', 'ok'].includes(v),
  end: (v) => ['finished', 'failed', 'lost', 'canceled', 'not_formed'].includes(v),
  path: (v) => ['local', 'instance'].includes(v),
  step: (v) => ['accept', 'settle'].includes(v),
};

/** The demo engine, except that a prompt of "please fail" fails for good. */
const failingDemo = (): Engine => {
  const demo = createDemoEngine({ delayMs: 0 });
  return async (kind, input, ctx) => {
    if (input.prompt === 'please fail') throw Object.assign(new Error('the prompt asked to fail'), { code: 'bad_prompt', retryable: false });
    return demo(kind, input, ctx);
  };
};

async function scrape(gw: TestGateway, headers: Record<string, string> = {}): Promise<Exposition> {
  const res = await gw.request('GET', '/metrics', { headers });
  assert.equal(res.status, 200, res.text);
  return new Exposition(res.text);
}

/** Polls the run until it is terminal; returns its status. */
async function settled(gw: TestGateway, key: string, runId: string): Promise<string> {
  return until(`run ${runId} to end`, async () => {
    const res = await gw.request('GET', `/v1/jobs/${runId}`, { key });
    return res.body.terminal ? (res.body.status as string) : undefined;
  });
}

describe('GET /metrics', function () {
  this.timeout(60_000);
  const prefix = uniquePrefix('metrics');
  // A real webhook receiver and tool (the ToolServer), the gateway, its account and its worker.
  let dir: string, server: ToolServer, gw: TestGateway, account: { id: string; key: string }, worker: SwitchyardWorker;
  /** The exposition right after the activity of `before`, for the counters and histograms. */
  let after1: Exposition;
  const runIds: string[] = [];

  before(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'sy-metrics-'));
    server = await new ToolServer(dir).start();
    server.script('/gone', { status: 410 });
    server.script('/down', { status: 500 });
    gw = await new TestGateway(prefix, {
      DATA_DIR: dir,
      OUTBOUND_CA_FILE: server.caFile,
      OUTBOUND_ALLOW_CIDRS: '127.0.0.1/32',
      OUTBOUND_ALLOWED_PORTS: String(server.port),
      // One quick retry: a failing receiver goes retrying, then gave_up.
      WEBHOOK_RETRY_DELAYS_MS: '50',
      // A silent worker is cut off after 3 missed heartbeats: 600 ms, not 15 s.
      HEARTBEAT_MS: '200',
    }).start();
    account = await gw.account(10_000);
    worker = new SwitchyardWorker({ gateway: gw.url, token: await gw.workerToken('open', 'fleet'), kinds: [IMAGE, SFX], handler: failingDemo(), logger: silentLogger });
    await worker.start();

    const ok = await gw.submit(account.key, { kind: IMAGE, input: { prompt: 'a lighthouse' } }, { 'idempotency-key': 'metrics-1' });
    const replay = await gw.submit(account.key, { kind: IMAGE, input: { prompt: 'a lighthouse' } }, { 'idempotency-key': 'metrics-1' });
    assert.equal(replay.body.run_id, ok.body.run_id, 'the replay names the same run');
    const bad = await gw.submit(account.key, { kind: IMAGE, input: { prompt: 'please fail' } });
    const idle = await gw.submit(account.key, { kind: VIDEO, input: { prompt: 'a storm' } });
    assert.equal((await gw.request('POST', `/v1/jobs/${idle.body.run_id}/cancel`, { key: account.key })).status, 200);
    const hooks = await Promise.all(
      ['/hook', '/gone', '/down'].map((p) => gw.submit(account.key, { kind: SFX, input: { prompt: `a bell for ${p}` }, webhook: server.url(p) })),
    );
    runIds.push(ok.body.run_id, bad.body.run_id, idle.body.run_id, ...hooks.map((h) => h.body.run_id));
    assert.equal(await settled(gw, account.key, ok.body.run_id), 'succeeded');
    assert.equal(await settled(gw, account.key, bad.body.run_id), 'failed');
    for (const h of hooks) assert.equal(await settled(gw, account.key, h.body.run_id), 'succeeded');
    assert.equal((await gw.request('GET', `/v1/jobs/${ok.body.run_id}`, { key: account.key })).status, 200);
    assert.equal((await gw.request('GET', '/v1/jobs/run_01J00000000000000000000000', { key: account.key })).status, 404);
    assert.equal((await gw.request('GET', '/no/such/path/run_01J00000000000000000000000')).status, 404);
    // Webhook attempts run on the gateway's webhook worker, after the run ended.
    after1 = await until('every webhook attempt', async () => {
      const e = await scrape(gw);
      return e.value('switchyard_webhook_deliveries_total', { outcome: 'gave_up' }) === 1 ? e : undefined;
    });
  });

  after(async () => {
    await worker?.stop();
    await gw?.stop();
    await server?.stop();
    await cleanupPrefix(prefix);
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('answers in the Prometheus text format without any credential, default process metrics included', async () => {
    const res = await gw.request('GET', '/metrics');
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type') ?? '', /^text\/plain; version=0\.0\.4/);
    const e = new Exposition(res.text);
    assert.equal(e.types.get('process_cpu_user_seconds_total'), 'counter');
    assert.equal(e.types.get('nodejs_heap_size_used_bytes'), 'gauge');
    assert.equal((await gw.request('GET', '/v1/metrics')).status, 404, 'the path is /metrics, not under /v1');
  });

  it('counts new runs once (idempotent replays not counted) and each end once, by kind and tier', () => {
    const image = { kind: IMAGE, tier: 'open' };
    assert.equal(after1.value('switchyard_jobs_submitted_total', image), 2);
    assert.equal(after1.value('switchyard_jobs_succeeded_total', image), 1);
    assert.equal(after1.value('switchyard_jobs_failed_total', image), 1);
    assert.equal(after1.value('switchyard_jobs_canceled_total', image), 0);
    assert.equal(after1.value('switchyard_jobs_submitted_total', { kind: VIDEO, tier: 'open' }), 1);
    assert.equal(after1.value('switchyard_jobs_canceled_total', { kind: VIDEO, tier: 'open' }), 1);
    assert.equal(after1.value('switchyard_jobs_succeeded_total', { kind: SFX, tier: 'open' }), 3);
    assert.equal(after1.value('switchyard_jobs_submitted_total', { kind: RIG, tier: 'trusted' }), 0, 'every kind and tier starts at 0');
  });

  it('counts credits reserved at submission and charged on success, by kind', () => {
    assert.equal(after1.value('switchyard_credits_reserved_total', { kind: IMAGE }), 2 * 4);
    assert.equal(after1.value('switchyard_credits_charged_total', { kind: IMAGE }), 4, 'the failed run is not charged');
    assert.equal(after1.value('switchyard_credits_reserved_total', { kind: VIDEO }), 40);
    assert.equal(after1.value('switchyard_credits_charged_total', { kind: VIDEO }), 0, 'the canceled run is not charged');
    assert.equal(after1.value('switchyard_credits_charged_total', { kind: SFX }), 3 * 4);
  });

  it('times the wait for a lease, the run and the dispatch of each leased run, in GPU-sized buckets', () => {
    const image = { kind: IMAGE, tier: 'open' };
    assert.equal(after1.value('switchyard_job_wait_seconds_count', image), 2);
    assert.equal(after1.value('switchyard_dispatch_latency_seconds_count', image), 2);
    assert.equal(after1.value('switchyard_job_run_seconds_count', { ...image, status: 'succeeded' }), 1);
    assert.equal(after1.value('switchyard_job_run_seconds_count', { ...image, status: 'failed' }), 1);
    assert.equal(after1.series('switchyard_job_run_seconds_count', { kind: VIDEO }).length, 0, 'a run canceled in its queue never ran');
    assert.equal(after1.series('switchyard_job_wait_seconds_count', { kind: VIDEO }).length, 0, 'nor was it leased');
    const les = (name: string) => after1.series(name, { ...image }).map((s) => s.labels.le);
    assert.deepEqual(les('switchyard_job_wait_seconds_bucket'), ['0.05', '0.1', '0.25', '0.5', '1', '2.5', '5', '10', '30', '60', '120', '300', '600', '1200', '1800', '3600', '+Inf']);
    assert.equal(les('switchyard_dispatch_latency_seconds_bucket')[0], '0.0005');
    assert.equal(after1.value('switchyard_dispatch_latency_seconds_bucket', { ...image, le: '+Inf' }), 2);
  });

  it('labels HTTP requests with the route template or "unmatched", never with a path or an id', () => {
    const http = 'switchyard_http_request_duration_seconds_count';
    assert.ok(after1.value(http, { method: 'GET', route: '/v1/jobs/{run_id}', status_class: '2xx' })! >= 1);
    assert.equal(after1.value(http, { method: 'GET', route: '/v1/jobs/{run_id}', status_class: '4xx' }), 1, 'the unknown run');
    assert.equal(after1.value(http, { method: 'GET', route: 'unmatched', status_class: '4xx' }), 1, 'the unknown path');
    assert.ok(after1.value(http, { method: 'POST', route: '/v1/jobs', status_class: '2xx' })! >= 7);
    assert.equal(after1.value(http, { method: 'POST', route: '/v1/jobs/{run_id}/cancel', status_class: '2xx' }), 1);
    for (const s of after1.samples) {
      for (const v of Object.values(s.labels)) {
        assert.ok(!/run_[0-9A-Z]{26}/.test(v) && !v.includes('/no/such'), `${s.name} has a label value ${v}`);
      }
    }
    for (const id of runIds) assert.ok(!after1.text.includes(id), `run id ${id} appears in the exposition`);
  });

  it('counts webhook attempts by outcome and tool calls by outcome', async () => {
    for (const outcome of ['delivered', 'retrying', 'gave_up', 'failed']) {
      assert.equal(after1.value('switchyard_webhook_deliveries_total', { outcome }), 1, outcome);
    }
    const created = await gw.request('POST', '/v1/tools/definitions', {
      key: account.key,
      body: { name: 'weather', description: 'the weather', kind: 'http', method: 'GET', url: server.url('/tool'), inputSchema: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } },
    });
    assert.equal(created.status, 201, created.text);
    const tools = gw.services.tools;
    const [tool] = await tools.resolve(account.id, [created.body.tool_id]);
    assert.equal((await tools.call(tool, { city: 'Paris' })).ok, true);
    assert.equal((await tools.call(tool, { town: 'Paris' })).ok, false);
    const e = await scrape(gw);
    assert.equal(e.value('switchyard_tool_calls_total', { outcome: 'ok' }), 1);
    assert.equal(e.value('switchyard_tool_calls_total', { outcome: 'failed' }), 1);
  });

  it('reports the queues fleet-wide by kind, tier and state, read at scrape time', async () => {
    const queued = await gw.submit(account.key, { kind: MUSIC, input: { prompt: 'a waltz' } });
    assert.equal(queued.status, 202);
    // Runs carry a priority, so BullMQ keeps them in its prioritized set.
    const e = await until('the queued run in the gauge', async () => {
      const x = await scrape(gw);
      return x.value('switchyard_queue_jobs', { kind: MUSIC, tier: 'open', state: 'prioritized' }) === 1 ? x : undefined;
    });
    assert.equal(e.value('switchyard_queue_jobs', { kind: MUSIC, tier: 'open', state: 'active' }), 0);
    assert.equal(e.series('switchyard_queue_jobs').length, KIND_NAMES.length * TIERS.length * 4, 'every queue and state, zeros included');
    await gw.request('POST', `/v1/jobs/${queued.body.run_id}/cancel`, { key: account.key });
  });

  it("counts this instance's workers under each kind they serve, their slots and sockets, and drops them when they leave", async () => {
    let e = await scrape(gw);
    assert.equal(e.value('switchyard_workers_connected', { kind: IMAGE, tier: 'open' }), 1);
    assert.equal(e.value('switchyard_workers_connected', { kind: SFX, tier: 'open' }), 1);
    assert.equal(e.value('switchyard_workers_connected', { kind: RIG, tier: 'open' }), 0);
    assert.equal(e.value('switchyard_worker_slots', { tier: 'open', state: 'free' }), 1);
    assert.equal(e.value('switchyard_worker_slots', { tier: 'open', state: 'busy' }), 0);
    assert.equal(e.value('switchyard_websocket_connections', { surface: 'worker' }), 1);

    const rigger = new SwitchyardWorker({ gateway: gw.url, token: await gw.workerToken('open', 'rigger'), kinds: [RIG, IMAGE], slots: 3, handler: createDemoEngine({ delayMs: 0 }), logger: silentLogger });
    await rigger.start();
    e = await scrape(gw);
    assert.equal(e.value('switchyard_workers_connected', { kind: RIG, tier: 'open' }), 1);
    assert.equal(e.value('switchyard_workers_connected', { kind: IMAGE, tier: 'open' }), 2);
    assert.equal(e.value('switchyard_worker_slots', { tier: 'open', state: 'free' }), 4);
    assert.equal(e.value('switchyard_websocket_connections', { surface: 'worker' }), 2);
    await rigger.stop();
    e = await until('the worker to leave the gauge', async () => {
      const x = await scrape(gw);
      return x.value('switchyard_workers_connected', { kind: RIG, tier: 'open' }) === 0 ? x : undefined;
    });
    assert.equal(e.value('switchyard_workers_connected', { kind: IMAGE, tier: 'open' }), 1);
    assert.equal(e.value('switchyard_worker_slots', { tier: 'open', state: 'free' }), 1);
  });

  it('counts open SSE streams and caller WebSockets while they are open', async () => {
    const queued = await gw.submit(account.key, { kind: MUSIC, input: { prompt: 'a march' } });
    const sse = await new SseClient(`${gw.url}/v1/jobs/${queued.body.run_id}/events`, account.key).open();
    const ws = new WebSocket(`${gw.url.replace(/^http/, 'ws')}/v1/ws`, { headers: { authorization: `Bearer ${account.key}` } });
    await new Promise((resolve, reject) => ws.once('open', resolve).once('error', reject));
    const e = await until('the stream and the socket in the gauges', async () => {
      const x = await scrape(gw);
      return x.value('switchyard_sse_connections') === 1 && x.value('switchyard_websocket_connections', { surface: 'caller' }) === 1 ? x : undefined;
    });
    assert.equal(e.value('switchyard_websocket_connections', { surface: 'bot' }), 0);
    sse.req.destroy();
    ws.close();
    await until('both to be counted out', async () => {
      const x = await scrape(gw);
      return x.value('switchyard_sse_connections') === 0 && x.value('switchyard_websocket_connections', { surface: 'caller' }) === 0;
    });
    await gw.request('POST', `/v1/jobs/${queued.body.run_id}/cancel`, { key: account.key });
  });

  it('counts lost leases by reason (a closed socket, missed heartbeats) and the runs requeued', async () => {
    const before = await scrape(gw);
    const lost = (e: Exposition, reason: string) => e.value('switchyard_leases_lost_total', { reason })! - before.value('switchyard_leases_lost_total', { reason })!;
    const requeued = (e: Exposition) => e.value('switchyard_jobs_requeued_total', { kind: MESH, tier: 'open' })! - before.value('switchyard_jobs_requeued_total', { kind: MESH, tier: 'open' })!;
    const run = await gw.submit(account.key, { kind: MESH, input: { prompt: 'a chair' } });

    const closer = await new RawWorker(gw.url, await gw.workerToken('open', 'closer')).connect({ kinds: [MESH] });
    await closer.lease();
    closer.close();
    await until('the closed socket to count', async () => {
      const e = await scrape(gw);
      return lost(e, 'disconnect') === 1 && requeued(e) === 1;
    });

    const silent = await new RawWorker(gw.url, await gw.workerToken('open', 'silent'), { heartbeats: false }).connect({ kinds: [MESH] });
    await silent.lease();
    const e = await until('the silent worker to count', async () => {
      const x = await scrape(gw);
      return lost(x, 'heartbeat') === 1 && requeued(x) === 2 ? x : undefined;
    });
    assert.equal(lost(e, 'disconnect'), 1, 'a silent worker is not counted as a disconnect');
    assert.equal(lost(e, 'shutdown') + lost(e, 'gateway_lost'), 0);
    await gw.request('POST', `/v1/jobs/${run.body.run_id}/cancel`, { key: account.key });
  });

  it('names its metrics as agreed: counters end in _total, histograms in _seconds, label values from fixed sets', async () => {
    const e = await scrape(gw);
    for (const [name, type] of e.types) if (type === 'counter') assert.match(name, /_total$/, `counter ${name}`);
    const ours = [...e.types].filter(([name]) => name.startsWith('switchyard_'));
    assert.deepEqual(ours.map(([n]) => n).sort(), Object.keys(AGREED).sort(), 'exactly the agreed switchyard_ families');
    for (const [name, type] of ours) {
      assert.equal(type, AGREED[name].type, name);
      if (type === 'histogram') assert.match(name, /_seconds$/);
    }
    for (const s of e.samples) {
      const family = e.familyOf(s.name);
      if (!family.startsWith('switchyard_')) continue;
      const names = Object.keys(s.labels).filter((l) => l !== 'le');
      assert.deepEqual(names.sort(), [...AGREED[family].labels].sort(), `labels of ${s.name}`);
      for (const [label, value] of Object.entries(s.labels)) {
        if (label === 'le') continue;
        assert.ok(ENUMS[label](value), `${s.name}{${label}="${value}"} is outside its set`);
      }
    }
  });

  it('is in the OpenAPI document under the operators tag, as text/plain', async () => {
    const doc = (await gw.request('GET', '/v1/openapi.json')).body;
    const op = doc.paths['/metrics'].get;
    assert.deepEqual(op.tags, ['operators']);
    assert.ok(op.responses['200'].content['text/plain']);
  });
});

describe('GET /metrics with METRICS_TOKEN', function () {
  this.timeout(30_000);
  const prefix = uniquePrefix('metrics-token');
  const token = 'metrics-token-0123456789abcdef';
  let gw: TestGateway;

  before(async () => {
    gw = await new TestGateway(prefix, { METRICS_TOKEN: token }).start();
  });
  after(async () => {
    await gw?.stop();
    await cleanupPrefix(prefix);
  });

  it('refuses a scrape without the token, with a wrong one or another scheme: 401 with the error envelope', async () => {
    const { key } = await gw.account();
    for (const authorization of [undefined, `Bearer ${token}x`, 'Bearer wrong', `Basic ${Buffer.from(`admin:${token}`).toString('base64')}`, `Bearer ${key}`, `Bearer ${ADMIN_TOKEN}`]) {
      const res = await gw.request('GET', '/metrics', { headers: authorization ? { authorization } : {} });
      assert.equal(res.status, 401, `${authorization}: ${res.text}`);
      assert.equal(errorCode(res), 'unauthorized');
      assert.match(res.headers.get('www-authenticate') ?? '', /^Bearer/);
      assert.ok(!res.text.includes('switchyard_'), 'no metric leaks in a refusal');
    }
  });

  it('answers the scrape that presents the token', async () => {
    const e = await scrape(gw, { authorization: `Bearer ${token}` });
    assert.ok(e.types.has('switchyard_jobs_submitted_total'));
  });
});

describe('GET /metrics at shutdown', function () {
  this.timeout(30_000);
  const prefix = uniquePrefix('metrics-stop');
  after(() => cleanupPrefix(prefix));

  it('counts the leases a stopping gateway takes back as lost to shutdown', async () => {
    const gw = await new TestGateway(prefix).start();
    const { key } = await gw.account();
    const raw = await new RawWorker(gw.url, await gw.workerToken('open', 'held')).connect({ kinds: [MESH] });
    await gw.submit(key, { kind: MESH, input: { prompt: 'a table' } });
    await raw.lease();
    await gw.stop();
    await raw.closed;
    // The server is gone; the registry is still there to read.
    const e = new Exposition(await gw.metrics.registry.getSingleMetricAsString('switchyard_leases_lost_total'));
    assert.equal(e.value('switchyard_leases_lost_total', { reason: 'shutdown' }), 1);
    assert.equal(e.value('switchyard_leases_lost_total', { reason: 'disconnect' }), 0);
  });
});
