import assert from 'node:assert/strict';
import { pino } from 'pino';
import { RunEventHub } from '../api/services/events/run-event-hub.js';
import { createRedis } from '../models/redis-connection.js';
import { RunEventLog } from '../models/run-event-log.js';
import { REDIS_URL, cleanupPrefix, uniquePrefix, until } from './helpers/harness.js';

/** A real log that counts read-backs, the hub's costly path. */
class CountingLog extends RunEventLog {
  reads = 0;
  override after(runId: string, after: number, count?: number) {
    this.reads++;
    return super.after(runId, after, count);
  }
}

describe('RunEventHub fan-out', function () {
  const prefix = uniquePrefix('hub');
  const redis = createRedis(REDIS_URL, { name: 'test-hub' });
  const subscriber = createRedis(REDIS_URL, { name: 'test-hub-sub', blocking: true });
  const log = new CountingLog({ redis, prefix, maxLength: 1000, ttlMs: 60_000 });
  const hub = new RunEventHub({ subscriber, log, logger: pino({ level: 'silent' }) });

  before(() => hub.start());
  after(async () => {
    hub.stop();
    await cleanupPrefix(prefix);
    redis.disconnect();
    subscriber.disconnect();
  });

  it('delivers a burst of events that arrive in one read in order, without reading the log back', async () => {
    const got: number[] = [];
    const stop = await hub.subscribe('run_burst', (e) => got.push(e.id));
    await log.append('run_burst', [{ event: 'log', data: { line: 'first' } }]);
    await until('the first event', async () => got.length === 1);
    // Twenty events published by one script arrive together: no gap among them.
    await log.append('run_burst', Array.from({ length: 20 }, (_, i) => ({ event: 'output' as const, data: { delta: String(i) } })));
    await until('the burst', async () => got.length === 21);
    assert.deepEqual(got, Array.from({ length: 21 }, (_, i) => i + 1));
    assert.equal(log.reads, 0, 'no read-back without a real gap');
    stop();
  });

  it('one subscription per run serves every local follower, and ends with the last one', async () => {
    const a: number[] = [];
    const b: number[] = [];
    const stopA = await hub.subscribe('run_shared', (e) => a.push(e.id));
    const stopB = await hub.subscribe('run_shared', (e) => b.push(e.id));
    assert.equal(hub.followedRuns, 1);
    await log.append('run_shared', [{ event: 'log', data: { line: 'x' } }]);
    await until('both followers', async () => a.length === 1 && b.length === 1);
    stopA();
    assert.equal(hub.followedRuns, 1);
    stopB();
    assert.equal(hub.followedRuns, 0);
  });
});
