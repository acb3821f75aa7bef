import assert from 'node:assert/strict';
import { createRedis } from '../models/redis-connection.js';
import { RunEventLog } from '../models/run-event-log.js';
import { REDIS_URL, cleanupPrefix, uniquePrefix } from './helpers/harness.js';
import { KilledGatewayFixture, loggedOutputs, outputText } from './helpers/killed-stream.js';
import { SseClient } from './helpers/sse-client.js';

describe('numbered output deltas (protocol 4 seq)', function () {
  const prefix = uniquePrefix('dseq');
  let redis: ReturnType<typeof createRedis>;
  let log: RunEventLog;

  before(() => {
    redis = createRedis(REDIS_URL, { name: 'test-dseq' });
    log = new RunEventLog({ redis, prefix, maxLength: 100_000, ttlMs: 60_000 });
  });
  after(async () => {
    await cleanupPrefix(prefix);
    redis.disconnect();
  });

  it('a delta at or below its lease\'s highest logged seq is dropped, in one batch or across batches; other leases and unnumbered events are untouched', async () => {
    const out = (delta: string, leaseId?: string, seq?: number) => ({ event: 'output' as const, data: { delta }, ...(leaseId ? { guard: { leaseId, seq: seq! } } : {}) });
    assert.equal(await log.append('run_s', [out('a', 'L1', 1), out('b', 'L1', 2), out('b', 'L1', 2), out('x', 'L2', 1)]), 3);
    // Sent again after a lost answer: 1 and 2 are copies, 3 is new.
    assert.equal(await log.append('run_s', [out('a', 'L1', 1), out('b', 'L1', 2), out('c', 'L1', 3)]), 4);
    // Nothing new: no event numbered, the counter stays.
    assert.equal(await log.append('run_s', [out('c', 'L1', 3), out('x', 'L2', 1)]), 4);
    // Older workers send no seq: every delta is logged, copies included.
    assert.equal(await log.append('run_s', [out('u'), out('u')]), 6);
    assert.deepEqual(await loggedOutputs(log, 'run_s'), ['a', 'b', 'x', 'c', 'u', 'u']);
    const ids = (await log.after('run_s', 0)).map((e) => e.id);
    assert.deepEqual(ids, [1, 2, 3, 4, 5, 6]);
  });
});

describe('a gateway killed mid-stream, protocol 4 with numbered deltas', function () {
  this.timeout(60_000);
  const fx = new KilledGatewayFixture('dseq-kill');

  it('the worker sends every un-acked delta again with its seq; the log holds each delta once and the resuming client reads the exact text', async () => {
    const register = { protocol: [4], kinds: ['inference:image:generate'] };
    const { key, token, runId, lease, client, sent, acked, eventLog } = await fx.streamUntilKilled(register, { seq: true });
    const before = await loggedOutputs(eventLog, runId);
    assert.ok(before.length >= acked, 'every acknowledged delta is logged');

    // Not knowing which un-acked deltas were logged, the worker sends all of them again; with
    // deltas logged but not acked, the log would hold those twice without the seq check.
    const w2 = await fx.resumeOnSurvivor(token, register, lease);
    const resent = sent.map((delta, i) => ({ delta, seq: i + 1 })).slice(acked);
    // And one that was acked, as a confused worker might: dropped too.
    resent.unshift({ delta: sent[0], seq: 1 });
    for (const r of resent) w2.send({ type: 'output', lease_id: lease.lease_id, fence: lease.fence, ...r });
    // Its own answer: the outputs' acks come first, and a complete waits for its outputs to be logged.
    const completed = w2.next((f) => f.lease_id === lease.lease_id && f.of === 'complete');
    w2.send({ type: 'complete', lease_id: lease.lease_id, fence: lease.fence, output: { urls: [] } });
    assert.equal((await completed).type, 'ack');

    assert.deepEqual(await loggedOutputs(eventLog, runId), sent, 'each delta once, in order');
    const seen = client.frames.at(-1)!.id;
    const resumed = await new SseClient(`${fx.survivor.url}/v1/jobs/${runId}/events`, key, { lastEventId: seen }).open();
    await resumed.closed;
    assert.equal(outputText(client.frames) + outputText(resumed.frames), sent.join(''));
    assert.equal(resumed.frames.at(-1)!.event, 'done');
  });
});
