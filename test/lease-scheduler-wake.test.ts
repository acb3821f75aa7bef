import assert from 'node:assert/strict';
import type { BullWorkers } from '../dispatch/bull-workers.js';
import type { ConnectedWorker } from '../dispatch/connected-worker.js';
import { pubsub } from '../models/redis-pubsub.js';
import type { Engine } from '../sdk/engines/types.js';
import { silentLogger } from '../sdk/worker/logger.js';
import { SwitchyardWorker } from '../sdk/worker/switchyard-worker.js';
import { TestGateway, cleanupPrefix, uniquePrefix, until } from './helpers/harness.js';

/**
 * A worker woken by an announcement leases its share of the announced jobs and stops there: a
 * further fetch would find the queue empty, and each fetch is a BullMQ script in Redis. Jobs
 * announced while it fills, or taken from another queue, still make it fill until no queue
 * it serves has work. A fill not woken by an announcement (registration, a lease ended, the
 * sweep) looks at the queues (two O(1) reads) before it fetches.
 */
describe('LeaseScheduler: waking workers for announced jobs', function () {
  const prefix = uniquePrefix('wake');
  const gw = new TestGateway(prefix);
  let worker: SwitchyardWorker;
  let connected: ConnectedWorker;
  let release!: () => void;
  const held = new Promise<void>((resolve) => (release = resolve));
  const started: string[] = [];
  const fetches: Array<{ queue: string; got: boolean }> = [];
  let looks = 0;
  let wakes = 0;
  let sweeps = 0;

  before(async () => {
    await gw.start();
    const bull = (gw.dispatcher as unknown as { bull: BullWorkers }).bull;
    const fetch = bull.fetch.bind(bull);
    bull.fetch = async (queue, token) => {
      const job = await fetch(queue, token);
      fetches.push({ queue, got: job !== undefined && job !== null });
      return job;
    };
    const scheduler = (gw.dispatcher as unknown as { scheduler: { wake(queue: string, count: number): void; sweep(): Promise<void> } }).scheduler;
    const wake = scheduler.wake.bind(scheduler);
    scheduler.wake = (queue, count) => {
      wakes++;
      wake(queue, count);
    };
    const sweep = scheduler.sweep.bind(scheduler);
    scheduler.sweep = () => (sweeps++, sweep());
    const heads = bull.heads.bind(bull);
    bull.heads = async (queues) => {
      looks++;
      return heads(queues);
    };
    const handler = (async (_kind, input) => {
      started.push(String(input.prompt));
      await held;
      return { artifacts: [] };
    }) as Engine;
    worker = new SwitchyardWorker({ gateway: gw.url, token: await gw.workerToken(), kinds: ['inference:image:generate'], slots: 4, handler, logger: silentLogger });
    await worker.start();
    await until('the worker is attached', async () => gw.dispatcher.localWorkers()[0]);
    connected = gw.dispatcher.workersOf(gw.dispatcher.localWorkers()[0].owner)[0];
    // Its fill at registration looked and found the queue empty.
    await until('the first fill is over', async () => looks > 0 && !connected.filling);
    assert.equal(fetches.length, 0);
  });
  after(async () => {
    release();
    await worker.stop();
    await gw.stop();
    await cleanupPrefix(prefix);
  });

  const idle = () => until('the fill is over', async () => !connected.filling);

  it('leases one announced job with one fetch, woken once: by the submission, not again by its own message', async () => {
    const { key } = await gw.account();
    fetches.length = 0;
    wakes = 0;
    // This listener comes after the dispatcher's on the same connection: once it has heard the
    // announcement, the dispatcher has too (and skipped it, as its own).
    let heard = false;
    const listener = (_channel: string, message: string) => (heard ||= /^inference\.image\.generate\.open(#\d+of\d+)? /.test(message));
    const stopListening = pubsub.onMessage(gw.gateway.core.subscriber, listener);
    try {
      assert.equal((await gw.submit(key, { kind: 'inference:image:generate', input: { prompt: 'one' } })).status, 202);
      await until('the worker runs it', async () => started.includes('one'));
      await until('the announcement comes back from Redis', async () => heard);
    } finally {
      stopListening();
    }
    await idle();
    assert.deepEqual(fetches.map((f) => f.got), [true]);
    assert.equal(wakes, 1);
  });

  it('leases jobs announced together with a fetch each, and fills while it is filling until the queue is empty', async () => {
    const { key } = await gw.account();
    fetches.length = 0;
    sweeps = 0;
    const submitted = await Promise.all(['two', 'three', 'four'].map((prompt) => gw.submit(key, { kind: 'inference:image:generate', input: { prompt } })));
    assert.deepEqual(submitted.map((r) => r.status), [202, 202, 202]);
    await until('the worker runs them', async () => started.length === 4);
    // Announcements that came while it was filling for an earlier one reached it: none waited for the safety sweep.
    assert.equal(sweeps, 0);
    await idle();
    assert.equal(fetches.filter((f) => f.got).length, 3);
    // Announcements heard while it filled ask for a fill to the end: at most one fetch finds nothing,
    // per partition the jobs were announced in (QUEUE_PARTITIONS): a
    // woken fill fetches its announced partition first, which an earlier fill may have emptied.
    const partitions = new Set(fetches.map((f) => f.queue)).size;
    assert.ok(fetches.filter((f) => !f.got).length <= partitions, JSON.stringify(fetches));
  });

  it('looks before it fetches when a lease ends: an empty queue costs no fetch, a waiting job is fetched', async () => {
    const { key } = await gw.account();
    fetches.length = 0;
    looks = 0;
    // A fifth job waits: the four slots are taken.
    assert.equal((await gw.submit(key, { kind: 'inference:image:generate', input: { prompt: 'five' } })).status, 202);
    release();
    await until('the fifth job runs', async () => started.includes('five'));
    await until('every lease has ended', async () => connected.leases.size === 0);
    await idle();
    assert.ok(looks > 0);
    assert.deepEqual(fetches.filter((f) => !f.got), [], 'no fetch found the queue empty');
    assert.equal(fetches.filter((f) => f.got).length, 1, 'the waiting job was fetched');
  });
});

/**
 * A worker out of every ready set while it fills (its first fill at registration, or a fill
 * after a walk found it full) must still hear an announcement that comes meanwhile: its look
 * may have found the queue empty just before the job came. Otherwise the job waits for the
 * safety sweep (10 s): CI once timed a lease out that way (test/event-batching.test.ts).
 */
describe('LeaseScheduler: an announcement during a fill', function () {
  const prefix = uniquePrefix('wake-fill');
  const gw = new TestGateway(prefix);
  after(async () => {
    await gw.stop();
    await cleanupPrefix(prefix);
  });

  it('reaches a worker whose fill looked at the queue just before the job came', async () => {
    await gw.start();
    const scheduler = (gw.dispatcher as unknown as { scheduler: { sweep(): Promise<void> } }).scheduler;
    let sweeps = 0;
    const sweep = scheduler.sweep.bind(scheduler);
    scheduler.sweep = () => (sweeps++, sweep());
    // The registration fill's look answers as Redis did, but only once the job is submitted.
    const bull = (gw.dispatcher as unknown as { bull: BullWorkers }).bull;
    const heads = bull.heads.bind(bull);
    let submitted!: () => void;
    const afterSubmit = new Promise<void>((resolve) => (submitted = resolve));
    let looked = false;
    bull.heads = async (queues) => {
      const answer = await heads(queues);
      if (!looked) {
        looked = true;
        await afterSubmit;
      }
      return answer;
    };
    const started: string[] = [];
    const handler = (async (_kind, input) => (started.push(String(input.prompt)), { artifacts: [] })) as Engine;
    const worker = new SwitchyardWorker({ gateway: gw.url, token: await gw.workerToken(), kinds: ['inference:image:generate'], slots: 1, handler, logger: silentLogger });
    await worker.start();
    try {
      await until('the registration fill has looked', async () => looked);
      const { key } = await gw.account();
      assert.equal((await gw.submit(key, { kind: 'inference:image:generate', input: { prompt: 'during the fill' } })).status, 202);
      submitted();
      await until('the worker runs it', async () => started.includes('during the fill'));
      assert.equal(sweeps, 0, 'the job waited for the safety sweep');
    } finally {
      await worker.stop();
    }
  });
});
