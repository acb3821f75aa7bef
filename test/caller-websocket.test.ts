import assert from 'node:assert/strict';
import WebSocket from 'ws';
import { TestGateway, cleanupPrefix, uniquePrefix, until } from './helpers/harness.js';
import { RawWorker, type Frame } from './helpers/raw-worker.js';

type Msg = Record<string, any>;

/** A caller on /v1/ws that keeps every message it receives. */
class Caller {
  readonly messages: Msg[] = [];
  ws!: WebSocket;
  closed!: Promise<{ code: number; reason: string }>;

  async open(url: string, headers: Record<string, string> = {}): Promise<this> {
    this.ws = new WebSocket(`${url.replace(/^http/, 'ws')}/v1/ws`, { headers });
    this.closed = new Promise((resolve) => this.ws.on('close', (code, reason) => resolve({ code, reason: reason.toString() })));
    this.ws.on('message', (data) => this.messages.push(JSON.parse(data.toString())));
    await new Promise<void>((resolve, reject) => {
      this.ws.once('open', () => resolve());
      this.ws.once('unexpected-response', (_req, res) => reject(Object.assign(new Error(`refused ${res.statusCode}`), { status: res.statusCode })));
      this.ws.once('error', reject);
    });
    return this;
  }

  send(msg: unknown): void {
    this.ws.send(typeof msg === 'string' ? msg : JSON.stringify(msg));
  }

  async next(pred: (m: Msg) => boolean): Promise<Msg> {
    return until('a WebSocket message', async () => this.messages.find(pred));
  }

  events(runId: string): Msg[] {
    return this.messages.filter((m) => m.type === 'event' && m.run_id === runId);
  }
}

describe('caller WebSocket /v1/ws', function () {
  const prefix = uniquePrefix('callws');
  let gw: TestGateway;
  let key: string;
  let worker: RawWorker;

  before(async () => {
    gw = await new TestGateway(prefix).start();
    key = (await gw.account(10_000)).key;
    const token = (await gw.workerToken('open', 'op'));
    worker = await new RawWorker(gw.url, token).connect({ kinds: ['inference:image:generate'], slots: 8 });
  });
  after(async () => {
    worker.close();
    await gw.stop();
    await cleanupPrefix(prefix);
  });

  const leaseFor = async (runId: string): Promise<Frame> => {
    for (;;) {
      const lease = await worker.lease();
      if (lease.run_id === runId) return lease;
      await worker.complete(lease, []);
    }
  };

  it('authenticates by header, submits, subscribes and receives event frames through done', async () => {
    const c = await new Caller().open(gw.url, { authorization: `Bearer ${key}` });
    await c.next((m) => m.type === 'authenticated');
    c.send({ type: 'submit', id: 'job-1', kind: 'inference:image:generate', input: { prompt: 'a boat' } });
    const accepted = await c.next((m) => m.type === 'accepted');
    assert.equal(accepted.id, 'job-1');
    assert.match(accepted.run_id, /^run_[0-9A-HJKMNP-TV-Z]{26}$/);
    assert.equal(accepted.status, 'queued');
    c.send({ type: 'subscribe', run_id: accepted.run_id });
    await c.next((m) => m.type === 'subscribed' && m.run_id === accepted.run_id);
    const lease = await leaseFor(accepted.run_id);
    await worker.report(lease, { type: 'output', delta: 'hi' });
    await worker.complete(lease, []);
    await until('done', async () => c.events(accepted.run_id).some((m) => m.event === 'done'));
    const events = c.events(accepted.run_id);
    assert.equal(events[0].event, 'status');
    assert.deepEqual(events.slice(-3).map((m) => m.event), ['output', 'status', 'done']);
    events.forEach((m, i) => i > 0 && assert.equal(m.id, events[i - 1].id + 1));
    assert.equal(events.at(-1)!.data.status, 'succeeded');
    c.ws.close();
  });

  it('authenticates by first message and resumes a subscription with after', async () => {
    const c = await new Caller().open(gw.url);
    c.send({ type: 'submit', kind: 'inference:image:generate', input: { prompt: 'x' } });
    const refused = await c.next((m) => m.type === 'error');
    assert.equal(refused.code, 'unauthorized');
    assert.equal(c.ws.readyState, WebSocket.OPEN, 'asking before auth is an error frame, not a close');
    c.send({ type: 'auth', key });
    await c.next((m) => m.type === 'authenticated');
    const runId = (await gw.submit(key)).body.run_id;
    const lease = await leaseFor(runId);
    for (let i = 0; i < 4; i++) await worker.report(lease, { type: 'log', line: `l${i}` });
    c.send({ type: 'subscribe', run_id: runId, after: 2 });
    await until('the backlog', async () => c.events(runId).length >= 3);
    await worker.complete(lease, []);
    await until('done', async () => c.events(runId).some((m) => m.event === 'done'));
    const ids = c.events(runId).map((m) => m.id);
    assert.equal(ids[0], 3, 'starts right after `after`');
    ids.forEach((id, i) => i > 0 && assert.equal(id, ids[i - 1] + 1));
    c.ws.close();
  });

  it('an unsubscribe sent right behind its subscribe leaves no follower behind', async () => {
    const c = await new Caller().open(gw.url, { authorization: `Bearer ${key}` });
    await c.next((m) => m.type === 'authenticated');
    const runId = (await gw.submit(key)).body.run_id;
    c.send({ type: 'subscribe', run_id: runId });
    c.send({ type: 'unsubscribe', run_id: runId });
    c.send({ type: 'subscribe', run_id: runId, after: 0 });
    c.send({ type: 'subscribe', run_id: runId, after: 0 });
    c.send({ type: 'unsubscribe', id: 'last', run_id: runId });
    await c.next((m) => m.type === 'unsubscribed' && m.id === 'last');
    await until('no follower left for the run', async () => gw.hub.followedRuns === 0);
    c.ws.close();
  });

  it('answers bad messages with clear error frames and stays open', async () => {
    const c = await new Caller().open(gw.url, { authorization: `Bearer ${key}` });
    const cases: Array<[unknown, string, RegExp]> = [
      ['not json', 'invalid_request', /not valid JSON/],
      ['[1,2]', 'invalid_request', /JSON object/],
      [{ type: 'dance' }, 'invalid_request', /unknown message type/],
      [{ type: 'submit', id: 7, kind: 'nope:kind', input: {} }, 'unknown_kind', /./],
      [{ type: 'submit', id: 8, kind: 'inference:image:generate', input: {} }, 'invalid_request', /prompt/],
      [{ type: 'subscribe' }, 'invalid_request', /run_id/],
      [{ type: 'subscribe', run_id: 'run_01J0000000000000000000000' }, 'not_found', /run/],
      [{ type: 'subscribe', run_id: 'run_01J0000000000000000000000', after: -1 }, 'invalid_request', /after/],
      ['{"type":"submit","__proto__":{"x":1}}', 'invalid_request', /__proto__/],
    ];
    for (const [msg, code, text] of cases) {
      const before = c.messages.length;
      c.send(msg);
      const answer = await until('an answer', async () => c.messages.slice(before).find((m) => m.type === 'error'));
      assert.equal(answer.code, code, `for ${JSON.stringify(msg)}: ${JSON.stringify(answer)}`);
      assert.match(answer.message, text);
    }
    assert.equal(c.messages.find((m) => m.type === 'error' && m.code === 'unknown_kind')!.id, 7, 'the id is echoed');
    c.ws.send(Buffer.from([1, 2, 3]), { binary: true });
    await c.next((m) => m.type === 'error' && /text frames/.test(m.message));
    c.send({ type: 'ping', id: 'p' });
    assert.equal((await c.next((m) => m.type === 'pong')).id, 'p');
    c.ws.close();
  });

  it("another account's run is not found, and a bad key is refused at the upgrade", async () => {
    const other = await gw.account(10, 'other');
    const runId = (await gw.submit(key)).body.run_id;
    const c = await new Caller().open(gw.url, { 'x-service-key': other.key });
    c.send({ type: 'subscribe', run_id: runId });
    assert.equal((await c.next((m) => m.type === 'error')).code, 'not_found');
    c.ws.close();
    await assert.rejects(new Caller().open(gw.url, { authorization: 'Bearer sy_nottherightkey000000000000000000' }), (err: any) => err.status === 401);
    const bad = await new Caller().open(gw.url);
    bad.send({ type: 'auth', key: 'sy_wrong' });
    assert.equal((await bad.closed).code, 4401);
  });
});

describe('Prefer: wait on POST /v1/jobs', function () {
  const prefix = uniquePrefix('wait');
  let gw: TestGateway;
  let key: string;
  let token: string;

  before(async () => {
    gw = await new TestGateway(prefix).start();
    key = (await gw.account(10_000)).key;
    token = (await gw.workerToken('open', 'op'));
  });
  after(async () => {
    await gw.stop();
    await cleanupPrefix(prefix);
  });

  it('answers 201 with the finished job when the run ends within the wait', async () => {
    const worker = await new RawWorker(gw.url, token).connect({ kinds: ['inference:image:generate'] });
    try {
      const answer = gw.submit(key, undefined, { prefer: 'wait=30' });
      const lease = await worker.lease();
      await worker.complete(lease, ['https://example.test/a.png']);
      const res = await answer;
      assert.equal(res.status, 201);
      assert.equal(res.headers.get('preference-applied'), 'wait=30');
      assert.equal(res.body.status, 'succeeded');
      assert.equal(res.body.terminal, true);
      assert.deepEqual(res.body.output.urls, ['https://example.test/a.png']);
      assert.equal(res.headers.get('location'), `/v1/jobs/${res.body.run_id}`);
    } finally {
      worker.close();
    }
  });

  it('answers the usual 202 with the run id when the run is still going at the deadline', async () => {
    const res = await gw.submit(key, undefined, { prefer: 'respond-async, wait=1' });
    assert.equal(res.status, 202);
    assert.equal(res.body.status, 'queued');
    assert.match(res.body.run_id, /^run_/);
    assert.equal((await gw.request('GET', `/v1/jobs/${res.body.run_id}`, { key })).body.status, 'queued');
  });

  it('refuses a wait over 60 s or not a number with 400', async () => {
    for (const prefer of ['wait=61', 'wait=abc', 'wait=-1']) {
      const res = await gw.submit(key, undefined, { prefer });
      assert.equal(res.status, 400, prefer);
      assert.equal(res.body.error.code, 'invalid_request');
    }
  });
});
