import assert from 'node:assert/strict';
import { pino } from 'pino';
import { RunEventHub } from '../api/services/events/run-event-hub.js';
import { RunEventWriter } from '../api/services/events/run-event-writer.js';
import { createRedis } from '../models/redis-connection.js';
import { RunEventLog, type RunEventName } from '../models/run-event-log.js';
import { REDIS_URL, TestGateway, cleanupPrefix, uniquePrefix, until } from './helpers/harness.js';
import { RawWorker, type Frame } from './helpers/raw-worker.js';
import { KilledGatewayFixture, deltas, loggedOutputs, outputText } from './helpers/killed-stream.js';
import { SseClient } from './helpers/sse-client.js';

const silent = pino({ level: 'silent' });

/** A real log that records each call's batch, and can refuse chosen calls as a loading Redis would. */
class RecordingLog extends RunEventLog {
  readonly calls: number[] = [];
  refuse = new Set<number>();
  override async append(runId: string, events: Array<{ event: RunEventName; data: unknown }>): Promise<number> {
    this.calls.push(events.length);
    if (this.refuse.delete(this.calls.length)) throw new Error('LOADING Redis is loading the dataset in memory');
    return super.append(runId, events);
  }
}

describe('run event batching (group commit)', function () {
  const prefix = uniquePrefix('batch');
  let redis: ReturnType<typeof createRedis>;
  let subscriber: ReturnType<typeof createRedis>;
  let log: RecordingLog;
  let hub: RunEventHub;
  let writer: RunEventWriter;

  before(() => {
    redis = createRedis(REDIS_URL, { name: 'test-batch' });
    subscriber = createRedis(REDIS_URL, { name: 'test-batch-sub', blocking: true });
    log = new RecordingLog({ redis, prefix, maxLength: 100_000, ttlMs: 60_000 });
    hub = new RunEventHub({ subscriber, log, logger: silent });
    writer = new RunEventWriter(log, silent, [1, 1, 1]);
    hub.start();
  });
  beforeEach(() => {
    log.calls.length = 0;
  });
  after(async () => {
    hub.stop();
    await cleanupPrefix(prefix);
    redis.disconnect();
    subscriber.disconnect();
  });

  it('events queued while an append is in flight go out as one call; followers get each once, in order, live and on replay', async () => {
    const live: Array<{ id: number; delta: string }> = [];
    const stop = await hub.subscribe('run_group', (e) => live.push({ id: e.id, delta: JSON.parse(e.data).delta }));
    const sent = deltas(600);
    // All handed over at once, as a socket's burst of frames is: the first goes alone, the
    // rest wait for it and leave in batches of at most 256.
    await Promise.all(sent.map((d) => writer.output('run_group', d)));
    assert.deepEqual(log.calls, [1, 256, 256, 87]);
    await until('every event live', async () => live.length === sent.length);
    assert.deepEqual(live, sent.map((delta, i) => ({ id: i + 1, delta })));
    stop();
    // Replay from inside a batch and across its boundaries.
    for (const after of [0, 1, 200, 257, 513, 599]) {
      const replay = await log.after('run_group', after, 10_000);
      assert.deepEqual(replay.map((e) => e.id), sent.slice(after).map((_, i) => after + i + 1), `after ${after}`);
      assert.equal(replay.map((e) => JSON.parse(e.data).delta).join(''), sent.slice(after).join(''));
    }
    // The next append carries on from the counter.
    assert.equal(await log.append('run_group', [{ event: 'log', data: { line: 'x' } }]), 601);
  });

  it('a batch Redis refuses is sent again before anything queued behind it, and every caller is answered once it is logged', async () => {
    const live: string[] = [];
    const stop = await hub.subscribe('run_refused', (e) => live.push(JSON.parse(e.data).delta));
    log.refuse.add(2);
    const sent = deltas(100);
    const first = sent.slice(0, 50).map((d) => writer.output('run_refused', d));
    // Queued while the refused batch waits for its retry.
    await until('the refusal', async () => log.calls.length >= 2);
    const second = sent.slice(50).map((d) => writer.output('run_refused', d));
    await Promise.all([...first, ...second]);
    assert.deepEqual(log.calls.slice(0, 3), [1, 49, 49], 'the refused batch went again, alone');
    const logged = await log.after('run_refused', 0, 1000);
    assert.deepEqual(logged.map((e) => JSON.parse(e.data).delta), sent);
    await until('every event live', async () => live.length === sent.length);
    assert.deepEqual(live, sent);
    stop();
  });
});

describe('output frames through the gateway', function () {
  this.timeout(60_000);
  const prefix = uniquePrefix('batch-gw');
  let a: TestGateway;
  let b: TestGateway;
  const sockets: RawWorker[] = [];

  before(async () => {
    a = await new TestGateway(prefix).start();
    b = await new TestGateway(prefix).start();
  });
  // Each test's worker goes before the next test's job is submitted: an idle one left attached
  // would be the oldest ready worker, woken first, and take the next test's job.
  afterEach(async () => {
    for (const w of sockets.splice(0)) w.terminate();
    await until('no worker is attached', async () => a.dispatcher.localWorkers().length === 0 && b.dispatcher.localWorkers().length === 0);
  });
  after(async () => {
    await a.stop();
    await b.stop();
    await cleanupPrefix(prefix);
  });

  for (const protocol of [1, 4]) {
    it(`protocol ${protocol}: a burst of deltas from a worker on B reaches a follower on A in order, once, in fewer messages than deltas; answers keep frame order and complete comes last`, async () => {
      const { key } = await a.account(100);
      const worker = await new RawWorker(b.url, await b.workerToken()).connect({ protocol: [protocol], kinds: ['inference:image:generate'] });
      sockets.push(worker);
      const runId = (await a.submit(key)).body.run_id;
      const stream = await new SseClient(`${a.url}/v1/jobs/${runId}/events`, key).open();
      const lease: Frame = await worker.lease();
      await stream.until((c) => c.frames.length >= 1);
      const messages: string[] = [];
      const probe = createRedis(REDIS_URL, { name: 'test-batch-probe', blocking: true });
      try {
        probe.on('message', (_channel: string, message: string) => messages.push(message));
        await probe.subscribe(`${prefix}:ev:${runId}`);
        const sent = deltas(300);
        const answers: Frame[] = [];
        let ackFrames = 0;
        const lastAnswer = new Promise<void>((resolve) =>
          worker.ws.on('message', (data) => {
            const f = JSON.parse(data.toString()) as Frame;
            if (f.lease_id !== lease.lease_id || (f.type !== 'ack' && f.type !== 'error')) return;
            // Protocol 4 acks a batch of outputs in one frame: `count` answers, in order.
            for (let i = 0; i < (f.count ?? 1); i++) answers.push(f);
            ackFrames++;
            if (answers.length === sent.length + 1) resolve();
          }),
        );
        for (const delta of sent) worker.send({ type: 'output', lease_id: lease.lease_id, fence: lease.fence, delta });
        worker.send({ type: 'complete', lease_id: lease.lease_id, fence: lease.fence, output: { urls: [] } });
        await lastAnswer;
        assert.deepEqual(
          answers.map((f) => `${f.type}:${f.of}`),
          [...sent.map(() => 'ack:output'), 'ack:complete'],
        );
        if (protocol < 4) assert.equal(ackFrames, sent.length + 1, 'one answer per frame before protocol 4');
        else assert.ok(ackFrames < sent.length / 2, `${ackFrames} ack frames for ${sent.length} outputs`);
        await stream.closed;
        const events = stream.frames.map((f) => f.event);
        assert.deepEqual(events.slice(-2), ['status', 'done'], 'the final status comes after every delta');
        assert.equal(outputText(stream.frames), sent.join(''));
        for (let i = 1; i < stream.frames.length; i++) assert.equal(stream.frames[i].id, stream.frames[i - 1].id + 1);
        // One PUBLISH per batch: a socket that waited for each delta's round trip would publish one each.
        const published = messages.flatMap((m) => RunEventLog.parseMessage(m)).filter((e) => e.event === 'output');
        assert.equal(published.length, sent.length);
        assert.ok(messages.length < sent.length / 2, `${messages.length} messages for ${sent.length} deltas`);
        // A client resuming inside the burst gets exactly the rest.
        const mid = stream.frames[150].id;
        const resumed = await new SseClient(`${b.url}/v1/jobs/${runId}/events`, key, { lastEventId: mid }).open();
        await resumed.closed;
        assert.deepEqual(resumed.frames, stream.frames.filter((f) => f.id > mid));
      } finally {
        probe.disconnect();
      }
    });
  }
});

describe('a gateway killed mid-stream', function () {
  this.timeout(60_000);
  const fx = new KilledGatewayFixture('batch-kill');

  it('loses no delta it acknowledged: the client resumes on another instance with Last-Event-ID and reads the worker\'s text', async () => {
    const register = { protocol: [1, 2], kinds: ['inference:image:generate'] };
    const { key, token, runId, lease, client, sent, acked, eventLog } = await fx.streamUntilKilled(register, { seq: false });
    const logged = await loggedOutputs(eventLog, runId);
    assert.deepEqual(logged.slice(0, acked), sent.slice(0, acked), 'every acknowledged delta is in the log, in order');
    assert.deepEqual(logged, sent.slice(0, logged.length), 'and nothing out of order after them');

    // The worker takes its lease to the survivor and sends what was not logged (the log is
    // read here: protocols before 4 have no per-delta numbers).
    const w2 = await fx.resumeOnSurvivor(token, register, lease);
    for (const delta of sent.slice(logged.length)) w2.send({ type: 'output', lease_id: lease.lease_id, fence: lease.fence, delta });
    assert.equal((await w2.complete(lease)).type, 'ack');

    const seen = client.frames.at(-1)!.id;
    const resumed = await new SseClient(`${fx.survivor.url}/v1/jobs/${runId}/events`, key, { lastEventId: seen }).open();
    await resumed.closed;
    assert.equal(outputText(client.frames) + outputText(resumed.frames), sent.join(''));
    assert.equal(resumed.frames.at(-1)!.event, 'done');
  });
});

