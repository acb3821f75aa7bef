import assert from 'node:assert/strict';
import http from 'node:http';
import { EventSource } from 'eventsource';
import { everyNode } from './helpers/redis-nodes.js';
import { TestGateway, cleanupPrefix, errorCode, testRedis, uniquePrefix, until } from './helpers/harness.js';
import { RawWorker, type Frame } from './helpers/raw-worker.js';
import { SseClient, type SseFrame } from './helpers/sse-client.js';


/** Opens an `eventsource` EventSource with the account key; collects frames until `done`. */
function eventSource(url: string, key: string, lastEventId?: number) {
  const frames: SseFrame[] = [];
  const es = new EventSource(url, {
    fetch: (input, init) =>
      fetch(input, { ...init, headers: { ...(init?.headers as Record<string, string>), authorization: `Bearer ${key}`, ...(lastEventId !== undefined && !(init?.headers as Record<string, string>)?.['Last-Event-ID'] ? { 'last-event-id': String(lastEventId) } : {}) } }),
  });
  for (const name of ['status', 'progress', 'log', 'output', 'done']) {
    es.addEventListener(name, (e) => {
      frames.push({ id: Number(e.lastEventId), event: name, data: JSON.parse(e.data) });
      if (name === 'done') es.close();
    });
  }
  return { es, frames, done: () => until('the done event', async () => frames.some((f) => f.event === 'done')) };
}

/** Ids strictly increasing by one: no gap, no duplicate. */
function assertContiguous(frames: SseFrame[], from: number): void {
  frames.forEach((f, i) => assert.equal(f.id, from + i, `frame ${i} (${f.event}) has id ${f.id}, expected ${from + i}: ${frames.map((x) => x.id).join(',')}`));
}

describe('SSE events', function () {
  const prefix = uniquePrefix('sse');
  let gw: TestGateway;
  let key: string;
  let token: string;
  let worker: RawWorker;

  before(async () => {
    gw = await new TestGateway(prefix, { SSE_PING_MS: '200', EVENT_CLIENT_BUFFER: '64kb' }).start();
    key = (await gw.account(100_000)).key;
    token = await gw.workerToken();
  });
  beforeEach(async () => {
    worker = await new RawWorker(gw.url, token).connect({ kinds: ['inference:image:generate'], slots: 4 });
  });
  afterEach(() => worker.close());
  after(async () => {
    await gw.stop();
    await cleanupPrefix(prefix);
  });

  const submit = async () => (await gw.submit(key)).body.run_id as string;
  /** This run's lease; runs left over by earlier tests (requeued when their worker left) are finished on the way. */
  const leaseFor = async (runId: string): Promise<Frame> => {
    for (;;) {
      const lease = await worker.lease();
      if (lease.run_id === runId) return lease;
      await worker.complete(lease, []);
    }
  };
  const eventsUrl = (runId: string) => `${gw.url}/v1/jobs/${runId}/events`;

  it('a fresh connection gets status first, then progress, log, output, status changes, done, and the close', async () => {
    const runId = await submit();
    const lease = await leaseFor(runId);
    const client = await new SseClient(eventsUrl(runId), key).open();
    assert.equal(client.status, 200);
    assert.match(client.res!.headers['content-type']!, /^text\/event-stream/);
    assert.ok(client.res!.headers['x-request-id']);
    await client.until((c) => c.frames.length >= 1);
    assert.equal(client.frames[0].event, 'status');
    assert.equal(client.frames[0].data.status, 'running');
    assert.equal(client.frames[0].data.run_id, runId);
    await worker.report(lease, { type: 'progress', progress: 0.5, message: 'half' });
    await worker.report(lease, { type: 'log', line: 'step 1' });
    await worker.report(lease, { type: 'output', delta: 'hel' });
    await worker.complete(lease, []);
    await client.until((c) => c.frames.some((f) => f.event === 'done'));
    await client.closed;
    const names = client.frames.map((f) => f.event);
    assert.deepEqual(names, ['status', 'progress', 'log', 'output', 'status', 'done']);
    assertContiguous(client.frames, client.frames[0].id);
    assert.deepEqual(client.frames[1].data, { progress: 0.5, message: 'half' });
    assert.equal(client.frames[2].data.line, 'step 1');
    assert.ok(!Number.isNaN(Date.parse(client.frames[2].data.ts)));
    assert.deepEqual(client.frames[3].data, { delta: 'hel' });
    assert.equal(client.frames[4].data.status, 'succeeded');
    assert.equal(client.frames[5].data.status, 'succeeded');
    assert.equal(client.frames[5].data.terminal, true);
  });

  it('the eventsource package follows a run to done, and a run already over gets status, done, close', async () => {
    const runId = await submit();
    const first = eventSource(eventsUrl(runId), key);
    const lease = await leaseFor(runId);
    await worker.report(lease, { type: 'log', line: 'working' });
    await worker.complete(lease, []);
    await first.done();
    assert.equal(first.frames[0].event, 'status');
    assert.equal(first.frames.at(-1)!.data.status, 'succeeded');
    assertContiguous(first.frames, first.frames[0].id);

    const again = await new SseClient(eventsUrl(runId), key).open();
    await again.closed;
    assert.deepEqual(again.frames.map((f) => f.event), ['status', 'done']);
    assert.equal(again.frames[1].id, again.frames[0].id + 1);
    assert.equal(again.frames[1].id, first.frames.at(-1)!.id, 'the done frame keeps its logged id');
  });

  it('reconnecting with Last-Event-ID mid-stream replays exactly what was missed, then goes live', async () => {
    const runId = await submit();
    const lease = await leaseFor(runId);
    for (let i = 0; i < 5; i++) await worker.report(lease, { type: 'log', line: `line ${i}` });
    const a = await new SseClient(eventsUrl(runId), key, { lastEventId: 0 }).open();
    await a.until((c) => c.frames.length >= 3);
    a.close();
    const seen = a.frames.slice(0, 3);
    const last = seen.at(-1)!.id;
    for (let i = 5; i < 10; i++) await worker.report(lease, { type: 'log', line: `line ${i}` });
    const b = eventSource(eventsUrl(runId), key, last);
    await until('the replayed backlog', async () => b.frames.length >= 8);
    await worker.report(lease, { type: 'output', delta: 'live' });
    await worker.complete(lease, []);
    await b.done();
    const all = [...seen, ...b.frames];
    assertContiguous(all, 1);
    const lines = all.filter((f) => f.event === 'log').map((f) => f.data.line);
    assert.deepEqual(lines, Array.from({ length: 10 }, (_, i) => `line ${i}`));
    assert.deepEqual(all.slice(-3).map((f) => f.event), ['output', 'status', 'done']);
  });

  it('1,000 concurrent subscribers on one run all get the same events, in order, ending with done', async function () {
    this.timeout(60_000);
    const runId = await submit();
    const lease = await leaseFor(runId);
    const agent = new http.Agent({ keepAlive: false, maxSockets: Infinity });
    const clients = await Promise.all(Array.from({ length: 1000 }, () => new SseClient(eventsUrl(runId), key, { agent }).open()));
    await until('every subscriber has its first status', async () => clients.every((c) => c.frames.length >= 1), 30_000);
    for (let i = 0; i < 3; i++) await worker.report(lease, { type: 'progress', progress: (i + 1) / 4 });
    await worker.complete(lease, []);
    await Promise.all(clients.map((c) => c.closed));
    const expected = clients[0].frames.map((f) => `${f.id}:${f.event}`).join(' ');
    assert.match(expected, /progress.*progress.*progress.*status.*done$/);
    for (const c of clients) {
      const got = c.frames.map((f) => `${f.id}:${f.event}`).join(' ');
      // A subscriber that connected later may start at a later status; its tail is the same.
      assert.ok(expected.endsWith(got.slice(got.indexOf(' ') + 1)), `subscriber saw ${got}`);
      assert.equal(c.frames.at(-1)!.event, 'done');
    }
    agent.destroy();
  });

  it('a slow consumer is cut off at the buffer limit and resumes with Last-Event-ID, missing nothing', async function () {
    this.timeout(60_000);
    const runId = await submit();
    const lease = await leaseFor(runId);
    const slow = await new SseClient(eventsUrl(runId), key).open();
    await slow.until((c) => c.frames.length >= 1);
    slow.res!.pause(); // stops reading: kernel buffers fill, then the server's
    const big = 'x'.repeat(90_000);
    for (let i = 0; i < 200; i++) await worker.report(lease, { type: 'output', delta: `${i}:${big}` });
    slow.res!.resume();
    await slow.closed; // cut off by the server, not ended by `done`
    assert.ok(!slow.frames.some((f) => f.event === 'done'), 'the slow client was cut off before the end');
    assert.ok(slow.frames.length < 201, `got ${slow.frames.length} frames before the cut`);
    await worker.complete(lease, []);
    const resumed = await new SseClient(eventsUrl(runId), key, { lastEventId: slow.frames.at(-1)!.id }).open();
    await resumed.closed;
    const all = [...slow.frames, ...resumed.frames];
    assertContiguous(all, slow.frames[0].id);
    const outputs = all.filter((f) => f.event === 'output').map((f) => Number(String(f.data.delta).split(':')[0]));
    assert.deepEqual(outputs, Array.from({ length: 200 }, (_, i) => i));
    assert.equal(all.at(-1)!.event, 'done');
  });

  it('starts a client afresh whose Last-Event-ID is beyond the log, so it still gets done', async () => {
    const runId = await submit();
    const lease = await leaseFor(runId);
    const client = await new SseClient(eventsUrl(runId), key, { lastEventId: 999 }).open();
    await client.until((c) => c.frames.length >= 1);
    assert.equal(client.frames[0].event, 'status');
    assert.ok(client.frames[0].id < 999);
    await worker.complete(lease, []);
    await client.closed;
    assert.equal(client.frames.at(-1)!.event, 'done');
  });

  it('sends a ": ping" comment while idle', async () => {
    const runId = await submit();
    const client = await new SseClient(eventsUrl(runId), key).open();
    await client.until((c) => c.comments >= 2, 5000);
    client.close();
  });

  it('answers 404 for unknown and foreign runs, 400 for a malformed Last-Event-ID, 401 without a key', async () => {
    const runId = await submit();
    const other = await gw.account(10, 'other');
    assert.equal(errorCode(await gw.request('GET', `/v1/jobs/${runId}/events`, { key: other.key })), 'not_found');
    assert.equal(errorCode(await gw.request('GET', `/v1/jobs/run_01J0000000000000000000000/events`, { key })), 'not_found');
    assert.equal(errorCode(await gw.request('GET', `/v1/jobs/nope/events`, { key })), 'not_found');
    const bad = await gw.request('GET', `/v1/jobs/${runId}/events`, { key, headers: { 'last-event-id': 'abc' } });
    assert.equal(bad.status, 400);
    assert.equal(errorCode(bad), 'invalid_request');
    assert.equal((await gw.request('GET', `/v1/jobs/${runId}/events`)).status, 401);
  });

  it('a subscriber connection to Redis that drops and reconnects loses no event (read back from the log)', async () => {
    const runId = await submit();
    const lease = await leaseFor(runId);
    const client = await new SseClient(eventsUrl(runId), key).open();
    await client.until((c) => c.frames.length >= 1);
    const redis = testRedis();
    try {
      // The connection that holds the run's subscription: on a cluster a sharded subscriber on
      // the primary of the channel's slot (its name prefixed by ioredis's), among the client's
      // other connections of the same name, which hold none.
      let killed = false;
      for (const node of await everyNode(redis)) {
        const line = ((await node.client('LIST')) as string).split('\n').find((l) => l.includes(`switchyard:sub-${gw.gatewayId}`) && /\bs?sub=[1-9]/.test(l));
        if (line) killed = (await node.client('KILL', 'ID', /id=(\d+)/.exec(line)![1])) === 1;
        if (killed) break;
      }
      assert.ok(killed, 'the gateway subscriber connection is listed');
    } finally {
      redis.disconnect();
    }
    // Published while the subscriber is away: only the log has them.
    for (let i = 0; i < 3; i++) await worker.report(lease, { type: 'log', line: `while away ${i}` });
    await worker.complete(lease, []);
    await client.closed;
    assert.deepEqual(client.frames.filter((f) => f.event === 'log').map((f) => f.data.line), ['while away 0', 'while away 1', 'while away 2']);
    assertContiguous(client.frames, client.frames[0].id);
    assert.equal(client.frames.at(-1)!.event, 'done');
  });
});

describe('SSE across gateway instances', function () {
  const prefix = uniquePrefix('sse-ab');
  let a: TestGateway;
  let b: TestGateway;

  before(async () => {
    a = await new TestGateway(prefix).start();
    b = await new TestGateway(prefix).start();
  });
  after(async () => {
    await a.stop();
    await b.stop();
    await cleanupPrefix(prefix);
  });

  it('streams from instance A a run whose worker is connected to instance B', async () => {
    const { key } = await a.account(100);
    const worker = await new RawWorker(b.url, await b.workerToken()).connect({ kinds: ['inference:image:generate'] });
    try {
      const runId = (await a.submit(key)).body.run_id;
      const stream = eventSource(`${a.url}/v1/jobs/${runId}/events`, key);
      const lease: Frame = await worker.lease();
      await until('the first status on A', async () => stream.frames.length >= 1);
      await worker.report(lease, { type: 'progress', progress: 0.25 });
      await worker.report(lease, { type: 'log', line: 'from B' });
      await worker.complete(lease, []);
      await stream.done();
      const events = stream.frames.map((f) => f.event);
      assert.equal(events[0], 'status');
      assert.ok(events.includes('progress') && events.includes('log'));
      assert.deepEqual(events.slice(-2), ['status', 'done']);
      assertContiguous(stream.frames, stream.frames[0].id);
    } finally {
      worker.close();
    }
  });
});
