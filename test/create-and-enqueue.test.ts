import assert from 'node:assert/strict';
import { Redis } from 'ioredis';
import { Job } from 'bullmq';
import { CLASS_PRIORITY } from '../models/fair-share.js';
import { newRunId } from '../models/ids.js';
import { runQueueName } from '../queues/queue-names.js';
import type { CreateAndEnqueue } from '../queues/create-and-enqueue.js';
import { TestGateway, cleanupPrefix, newRunSpec, testRedis, uniquePrefix, until } from './helpers/harness.js';
import { nodeServing } from './helpers/redis-nodes.js';
import { RawWorker } from './helpers/raw-worker.js';

/** The standard class's band: a job of an account with nothing of its kind in flight has this priority. */
const STD = CLASS_PRIORITY.standard;

const KIND = 'inference:image:generate';
const image = (prompt: string) => ({ kind: KIND, input: { prompt } });
/** BullMQ scores a prioritized job `priority * 2^32 + a counter`: the priority it is served by. */
const servedPriority = (score: string | null) => (score === null ? null : Math.floor(Number(score) / 2 ** 32));

type Spied = Record<'eval' | 'evalsha', (...args: unknown[]) => unknown>;

/**
 * A submission's create and the add of its job go out in one pipeline on the queues' connection
 * (queues/create-and-enqueue.ts): the create first, so the record always exists before its job;
 * the job with the priority the create is expected to give, changed when it gave another.
 */
/** Counts BullMQ's `changePriority` calls (each a round trip more) until `restore`. */
function countPriorityChanges(): { count: number; restore(): void } {
  const changePriority = Job.prototype.changePriority;
  const counter = { count: 0, restore: () => void (Job.prototype.changePriority = changePriority) };
  Job.prototype.changePriority = function (this: Job, opts) {
    counter.count++;
    return changePriority.call(this, opts);
  };
  return counter;
}

describe('a run created and queued in one round trip', function () {
  this.timeout(30_000);
  const prefix = uniquePrefix('pipelined');
  const gw = new TestGateway(prefix, { HEARTBEAT_MS: '300', LEASE_TTL_MS: '3000', FAIR_SHARE_STEP: '10' });
  const workers: RawWorker[] = [];
  const queue = () => gw.queues.queue(KIND, 'open');
  const intake = () => gw.gateway.core.intake as CreateAndEnqueue;
  const job = async (runId: string, key: string) => (await gw.request('GET', `/v1/jobs/${runId}`, { key })).body;
  const worker = async () => {
    const w = await new RawWorker(gw.url, await gw.workerToken()).connect({ kinds: [KIND] });
    workers.push(w);
    return w;
  };
  const waitingOrLeased = async () => {
    const counts = await queue().getJobCounts('wait', 'prioritized', 'active', 'delayed');
    return Object.values(counts).reduce((a, b) => a + b, 0);
  };

  before(() => gw.start());
  afterEach(async () => {
    for (const w of workers.splice(0)) w.terminate();
    for (const q of gw.queues.all()) await q.obliterate({ force: true });
  });
  after(async () => {
    await gw.stop();
    await cleanupPrefix(prefix);
  });

  it('sends the create and then the add together on the queues connection, for each of concurrent submissions', async () => {
    const { key } = await gw.account(10_000);
    const client = testRedis('test-monitor');
    // On a cluster, the one node serving the prefix's slot sees all of it.
    const monitor = await (await nodeServing(client, `${prefix}:run:x`)).monitor();
    const seen: Array<{ args: string[]; source: string }> = [];
    monitor.on('monitor', (_time: string, args: string[], source: string) => {
      if (/^eval(sha)?$/i.test(args[0] ?? '') && args.some((a) => a.startsWith(`${prefix}:`))) seen.push({ args, source });
    });
    let ids: string[] = [];
    try {
      const answers = await Promise.all(Array.from({ length: 20 }, (_, i) => gw.submit(key, image(`batch-${i}`))));
      ids = answers.map((res) => (assert.equal(res.status, 202), res.body.run_id as string));
      await until('every script call to reach the monitor', async () => seen.filter((c) => ids.some((id) => c.args.includes(`${prefix}:run:${id}`))).length >= 20);
    } finally {
      monitor.disconnect();
      client.disconnect();
    }
    const queues = (await nodeServing(gw.gateway.core.queueConnection, `${prefix}:run:x`)).stream;
    for (const id of ids) {
      const create = seen.findIndex((c) => c.args.includes(`${prefix}:run:${id}`));
      assert.ok(create >= 0, `the create of ${id} was seen`);
      assert.equal(seen[create].source, `${queues.localAddress}:${queues.localPort}`, 'the create went out on the queues connection');
      // The next script call of that connection is the run's add: nothing of it came in between.
      const next = seen.slice(create + 1).find((c) => c.source === seen[create].source);
      assert.ok(next?.args.some((a) => a.includes(`"run_id":"${id}"`)) && !next.args.includes(`${prefix}:run:${id}`), `the add of ${id} came right after its create`);
    }
    assert.equal(await waitingOrLeased(), 20);
  });

  it("queues the job with the priority its create gave when the guess was wrong (an account with runs in flight this instance has not seen)", async () => {
    const busy = await gw.account(10_000, 'busy');
    const quiet = await gw.account(10_000, 'quiet');
    // 25 runs in flight made around this instance (as another instance would): rank 2 of FAIR_SHARE_STEP 10.
    const made = [];
    for (let i = 0; i < 25; i++) made.push(await gw.stores.runs.create(newRunSpec(busy.id, { price: 1 })));
    await gw.stores.runs.confirmEnqueued(made.map((m) => (m.outcome === 'created' ? m.run.run_id : '')));
    // Each change of a job's priority is a round trip more: counted, to see the guesses.
    const changes = countPriorityChanges();
    const runFinished = intake().runFinished;
    const finished: string[] = [];
    intake().runFinished = function (this: CreateAndEnqueue, run) {
      finished.push(run.account_id);
      return runFinished.call(this, run);
    };
    try {
      const first = await gw.submit(busy.key, image('behind'));
      assert.equal(first.body.priority, STD + 2);
      assert.equal(changes.count, 1, 'guessed STD');
      const queued = await queue().getJob(first.body.run_id);
      assert.equal(queued?.priority, STD + 2, 'the job was given the priority of its record');
      assert.equal(servedPriority(await gw.redis.zscore(queue().keys.prioritized, first.body.run_id)), STD + 2);
      // The quiet account's job, submitted later, is served first: the busy one's is behind it, as its record says.
      const second = await gw.submit(quiet.key, image('ahead'));
      assert.equal(second.body.priority, STD);
      assert.equal((await job(second.body.run_id, quiet.key)).queue_position, 1);
      assert.equal((await job(first.body.run_id, busy.key)).queue_position, 2);
      const third = await gw.submit(busy.key, image('behind-too'));
      assert.equal(third.body.priority, STD + 2);
      assert.equal((await queue().getJob(third.body.run_id))?.priority, STD + 2);
      // Ten of its runs finish here (canceled): 17 in flight, rank 1. The intake hears of each, for its guesses.
      for (const m of made.slice(0, 10)) {
        assert.ok(m.outcome === 'created');
        assert.equal((await gw.request('POST', `/v1/jobs/${m.run.run_id}/cancel`, { key: busy.key })).body.status, 'canceled');
      }
      assert.deepEqual(finished, Array(10).fill(busy.id));
      const fourth = await gw.submit(busy.key, image('fewer'));
      assert.equal(fourth.body.priority, STD + 1);
      assert.equal((await queue().getJob(fourth.body.run_id))?.priority, STD + 1);
    } finally {
      changes.restore();
      intake().runFinished = runFinished;
    }
  });

  it('keeps a guessed priority one rank off (no round trip to change it), its record exact', async () => {
    const near = await gw.account(10_000, 'near');
    // 10 runs in flight made around this instance: rank 1 of FAIR_SHARE_STEP 10, guessed 0 here.
    const made = [];
    for (let i = 0; i < 10; i++) made.push(await gw.stores.runs.create(newRunSpec(near.id, { price: 1 })));
    await gw.stores.runs.confirmEnqueued(made.map((m) => (m.outcome === 'created' ? m.run.run_id : '')));
    const changes = countPriorityChanges();
    try {
      const res = await gw.submit(near.key, image('one off'));
      assert.equal(res.body.priority, STD + 1, 'the record has the rank the create gave');
      assert.equal(changes.count, 0, 'a guess one rank off is not corrected');
      assert.equal((await queue().getJob(res.body.run_id))?.priority, STD, 'the job keeps the guess');
    } finally {
      changes.restore();
    }
  });

  it('creates a run with an Idempotency-Key before adding its job: its id is reused by the requests after it', async () => {
    const { key } = await gw.account(100);
    const piped: string[] = [];
    const submit = intake().submit;
    intake().submit = function (this: CreateAndEnqueue, run, gate) {
      piped.push(run.run_id);
      return submit.call(this, run, gate);
    };
    try {
      const keyed = await gw.submit(key, image('keyed'), { 'Idempotency-Key': 'k-1' });
      const plain = await gw.submit(key, image('plain'));
      assert.deepEqual(piped, [plain.body.run_id]);
      assert.equal((await queue().getJob(keyed.body.run_id))?.priority, STD, 'queued all the same');
    } finally {
      intake().submit = submit;
    }
  });

  it('a job leased before its priority is changed keeps its lease and completes once', async () => {
    const { key } = await gw.account(100);
    const w = await worker();
    const { body } = await gw.submit(key, image('leased'));
    const lease = await w.lease();
    assert.equal(lease.run_id, body.run_id);
    await (await queue().getJob(body.run_id))!.changePriority({ priority: 29 });
    assert.equal(await queue().getJobState(body.run_id), 'active');
    assert.equal((await w.complete(lease)).type, 'ack');
    assert.equal((await job(body.run_id, key)).status, 'succeeded');
    assert.equal(await queue().getJobState(body.run_id), 'completed');
    assert.equal(await waitingOrLeased(), 0, 'not queued again');
    assert.equal(w.leases().length, 1);
  });

  it('leaves no job queued for a refused create, and a job whose run was never made is dropped at lease, not run', async () => {
    const poor = await gw.account(2, 'poor');
    const refused = await Promise.all(Array.from({ length: 10 }, (_, i) => gw.submit(poor.key, image(`refused-${i}`))));
    assert.deepEqual(new Set(refused.map((r) => r.status)), new Set([402]));
    // Each refusal's answer came after its job was removed: none is left, in any state.
    const counts = await queue().getJobCounts('wait', 'prioritized', 'active', 'delayed', 'failed', 'completed');
    assert.deepEqual(Object.values(counts), [0, 0, 0, 0, 0, 0], JSON.stringify(counts));
    assert.equal((await gw.request('GET', '/v1/jobs', { key: poor.key })).body.data.length, 0);
    // A job that went in under a run that was never made (a dispatcher faster than its removal): dropped at lease.
    const w = await worker();
    const ghost = newRunId(poor.id);
    await gw.queues.add({ run_id: ghost, account_id: poor.id, kind: KIND, confidentiality: 'open', priority: 20, input: { prompt: 'ghost' } });
    await gw.dispatcher.announce(runQueueName({ run_id: ghost, kind: KIND, confidentiality: 'open', input: {} }));
    await until('the ghost job dropped', async () => (await queue().getJobState(ghost)) === 'failed');
    assert.equal(await gw.stores.runs.get(ghost), null, 'no record was made for it');
    assert.equal(await gw.redis.exists(`${prefix}:run:${ghost}`), 0);
    assert.equal(w.leases().length, 0, 'nothing was leased');
    const account = await gw.stores.accounts.get(poor.id);
    assert.deepEqual([account?.credits, account?.reserved, account?.in_flight], [2, 0, 0]);
    // The worker was live all along: a run that was made reaches it.
    const { key } = await gw.account(100);
    const ok = await gw.submit(key, image('made'));
    assert.equal((await w.lease()).run_id, ok.body.run_id);
  });

  it('a create that finds its run makes no second job, and a job added again for a finished run is dropped, not run', async () => {
    const { id: accountId, key } = await gw.account(100);
    // Its job still queued: the add is BullMQ's no-op, the job as it was.
    const spec = newRunSpec(accountId, { input: { prompt: 'twice' } });
    const made = await intake().submit(spec);
    assert.ok(made.ran && 'result' in made && made.result.outcome === 'created' && made.queued);
    const first = await queue().getJob(spec.run_id);
    const again = await intake().submit(spec);
    assert.ok(again.ran && 'result' in again && again.result.outcome === 'exists' && !again.queued);
    assert.equal(await waitingOrLeased(), 1);
    const kept = await queue().getJob(spec.run_id);
    assert.deepEqual([kept?.timestamp, kept?.priority], [first?.timestamp, first?.priority], 'the job as it was');
    assert.equal((await gw.stores.accounts.get(accountId))?.reserved, 4, 'reserved once');
    // Run to the end, then its job gone (retention): the add makes a job again, which the dispatcher drops.
    const w = await worker();
    const lease = await w.lease();
    assert.equal(lease.run_id, spec.run_id);
    assert.equal((await w.complete(lease)).type, 'ack');
    assert.equal((await job(spec.run_id, key)).status, 'succeeded');
    assert.equal(await queue().remove(spec.run_id), 1);
    const late = await intake().submit(spec);
    assert.ok(late.ran && 'result' in late && late.result.outcome === 'exists' && !late.queued);
    assert.ok(await queue().getJob(spec.run_id), 'a job was added again');
    await gw.dispatcher.announce(runQueueName(spec));
    await until('the late job dropped', async () => (await queue().getJobState(spec.run_id)) === 'failed');
    const run = await job(spec.run_id, key);
    assert.deepEqual([run.status, w.leases().length], ['succeeded', 1], 'it ran once');
    const account = await gw.stores.accounts.get(accountId);
    assert.deepEqual([account?.credits, account?.reserved, account?.in_flight], [96, 0, 0], 'charged once');
  });

  it('a create Redis lacks the script for (SCRIPT FLUSH) is made again under another id, and the job sent with it is removed', async () => {
    const { id: accountId, key } = await gw.account(100);
    // The next script sent on the queues connection goes by a SHA Redis does not know.
    const connection = gw.gateway.core.queueConnection as unknown as Spied;
    const { eval: evalText, evalsha } = connection;
    let spent: string | undefined;
    connection.eval = connection.evalsha = function (this: unknown, ...call: unknown[]) {
      spent = String(call[2]).replace(`${prefix}:run:`, '');
      connection.eval = evalText;
      connection.evalsha = evalsha;
      return evalsha.apply(this, ['0'.repeat(40), ...call.slice(1)]);
    };
    let res;
    try {
      res = await gw.submit(key, image('flushed'));
    } finally {
      connection.eval = evalText;
      connection.evalsha = evalsha;
    }
    assert.equal(res.status, 202);
    assert.ok(spent?.startsWith('run_'), 'the create went out with an unknown SHA');
    assert.notEqual(res.body.run_id, spent);
    assert.equal(await queue().getJob(spent!), undefined, 'the job sent with it was removed');
    assert.equal(await gw.stores.runs.get(spent!), null);
    assert.equal((await queue().getJob(res.body.run_id))?.priority, STD);
    assert.equal(await waitingOrLeased(), 1);
    await until('the outbox to empty', async () => (await gw.stores.runs.listUnconfirmed(0, 10)).length === 0);
    const account = await gw.stores.accounts.get(accountId);
    assert.deepEqual([account?.credits, account?.reserved, account?.in_flight], [96, 4, 1], 'one run made');
  });
});

describe('a run whose add failed behind its create', () => {
  it('is queued by the reconciler when the queue write after it fails too', async () => {
    const prefix = uniquePrefix('pipelined-add');
    const gw = await new TestGateway(prefix, { ENQUEUE_RECONCILE_AFTER_MS: '200' }).start();
    try {
      const { key } = await gw.account(100);
      const queues = gw.queues;
      const { addNow, add } = queues;
      // The add sent behind the create fails, and so does the queue write after it.
      queues.addNow = () => ({ job: {} as ReturnType<typeof addNow>['job'], added: Promise.reject(new Error('simulated add failure')) });
      queues.add = () => Promise.reject(new Error('simulated queue write failure'));
      let res;
      try {
        res = await gw.submit(key, image('outbox'));
      } finally {
        queues.addNow = addNow;
        queues.add = add;
      }
      assert.equal(res.status, 202);
      const q = gw.queues.queue(KIND, 'open');
      const queued = await until('the reconciler to queue the run', () => q.getJob(res.body.run_id));
      assert.equal(queued.priority, STD);
      await until('the outbox to empty', async () => (await gw.stores.runs.listUnconfirmed(0, 10)).length === 0);
      assert.equal(await q.count(), 1);
    } finally {
      await gw.stop();
      await cleanupPrefix(prefix);
    }
  });
});
