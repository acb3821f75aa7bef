import assert from 'node:assert/strict';
import { Redis } from 'ioredis';
import { isDatastoreUnavailable } from '../models/errors.js';
import { ReplicaWaitError, ReplicaWaiter, type DurableStep } from '../models/replica-waiter.js';
import { until } from './helpers/harness.js';
import { REDIS_SERVER, requireProgram } from './helpers/optional-program.js';
import { RedisServerProcess } from './helpers/redis-server-process.js';

/**
 * REDIS_WAIT_REPLICAS's waiter against a real primary and its replica (two private
 * redis-servers): an answer waits until the writes made before it are on the replica, many
 * concurrent answers share one WAIT, and short of the replicas the store is asked whether the
 * write survived, so no success goes out for a write a failover took away.
 */
describe('ReplicaWaiter (REDIS_WAIT_REPLICAS)', function () {
  this.timeout(60_000);
  let primary: RedisServerProcess;
  let replica: RedisServerProcess;
  let writer: Redis;
  let waiting: Redis;
  let onReplica: Redis;
  const seen: Array<{ step: DurableStep; enough: boolean }> = [];
  const shortfalls: number[] = [];

  const waiter = (timeoutMs = 5_000, queueProbeKey?: (queue: string) => string) =>
    new ReplicaWaiter({
      redis: waiting,
      replicas: 1,
      timeoutMs,
      probeKey: 'probe',
      ...(queueProbeKey ? { queueProbeKey } : {}),
      observe: (step, _s, enough) => seen.push({ step, enough }),
      shortfall: (acked) => shortfalls.push(acked),
    });
  const waits = async () => Number(/cmdstat_wait:calls=(\d+)/.exec(await writer.info('commandstats'))?.[1] ?? 0);

  before(async function () {
    const bin = requireProgram(this, REDIS_SERVER);
    primary = await RedisServerProcess.start(bin);
    replica = await RedisServerProcess.start(bin, ['--replicaof', '127.0.0.1', String(primary.port)]);
    writer = new Redis(primary.url, { maxRetriesPerRequest: 1 });
    waiting = new Redis(primary.url, { maxRetriesPerRequest: 1 });
    onReplica = new Redis(replica.url, { maxRetriesPerRequest: 1 });
    for (const c of [writer, waiting, onReplica]) c.on('error', () => {});
    await until('the replica is in sync', async () => /master_link_status:up/.test(await onReplica.info('replication')));
  });
  after(async () => {
    for (const c of [writer, waiting, onReplica]) c?.disconnect();
    await replica?.stop();
    await primary?.stop();
  });
  beforeEach(() => {
    seen.length = 0;
    shortfalls.length = 0;
  });

  it("answers only once the writes made on another connection before it are on the replica", async () => {
    // The write goes through the stores' connection, the WAIT through the waiter's own, which
    // wrote nothing else: its probe write is what ties its WAIT to the offset of the write.
    assert.equal(await writer.wait(1, 5_000), 1);
    replica.signal('SIGSTOP');
    let answered = false;
    let waited: Promise<void>;
    try {
      await writer.set('run:1', 'accepted');
      waited = waiter().after('accept', async () => assert.fail('not asked when the replica has it')).then(() => void (answered = true));
      // A WAIT of the test's own, which the frozen replica makes last its 200 ms: time for a waiter that did not wait to answer.
      assert.equal(await writer.wait(1, 200), 0);
      assert.equal(answered, false, 'answered while the replica was frozen');
    } finally {
      replica.signal('SIGCONT');
    }
    await waited;
    assert.equal(await onReplica.get('run:1'), 'accepted');
    assert.deepEqual(seen, [{ step: 'accept', enough: true }]);
  });

  it('gives 100 concurrent answers with two WAITs, the first round and one for everyone who came meanwhile', async () => {
    const w = waiter();
    const before = await waits();
    await Promise.all(Array.from({ length: 100 }, (_, i) => writer.set(`run:c${i}`, 'x').then(() => w.after('settle', async () => false))));
    assert.ok((await waits()) - before <= 2, `${(await waits()) - before} WAITs`);
    assert.equal(seen.length, 100);
    assert.ok(seen.every((s) => s.enough));
  });

  it('short of the replica (frozen), answers when the write is still in the store, counting the shortfall', async () => {
    replica.signal('SIGSTOP');
    try {
      await writer.set('run:2', 'accepted');
      await waiter(100).after('accept', async () => (await writer.exists('run:2')) === 1);
      assert.deepEqual(seen, [{ step: 'accept', enough: false }]);
      assert.deepEqual(shortfalls, [0]);
    } finally {
      replica.signal('SIGCONT');
    }
  });

  it("short of the replica, refuses (503: try again) when the store no longer has the write or cannot say", async () => {
    replica.signal('SIGSTOP');
    try {
      const lost = await waiter(100).after('settle', async () => false).then(() => null, (err: unknown) => err);
      assert.ok(lost instanceof ReplicaWaitError, String(lost));
      assert.match(lost.message, /lost with the Redis primary/);
      assert.ok(isDatastoreUnavailable(lost), 'rendered as unavailable');
      const unread = await waiter(100).after('accept', async () => { throw new Error('Connection is closed.'); }).then(() => null, (err: unknown) => err);
      assert.ok(unread instanceof ReplicaWaitError && unread.cause instanceof Error, String(unread));
    } finally {
      replica.signal('SIGCONT');
    }
  });

  it("waits for a queue's writes on that queue's probe when queues live apart (a cluster's spread queues), and says when they fell short", async () => {
    const apart = waiter(100, (queue) => `probe:${queue}`);
    const before = await waits();
    assert.equal(await apart.queueWrites('image.open'), true);
    assert.equal((await waits()) - before, 1, 'one WAIT, behind the probe of the queue');
    assert.equal(await waiting.exists('probe:image.open'), 1, "the probe was written in the queue's slot");
    replica.signal('SIGSTOP');
    try {
      assert.equal(await apart.queueWrites('image.open'), false, 'short of the replica: not confirmed');
      // Queues in the stores' slot: `after` covers their writes, and nothing more is waited for.
      const atOnce = await waits();
      assert.equal(await waiter(100).queueWrites('image.open'), true);
      assert.equal(await waits(), atOnce, 'no WAIT when queues share the stores\' slot');
    } finally {
      replica.signal('SIGCONT');
    }
  });
});
