import assert from 'node:assert/strict';
import type { BullWorkers } from '../dispatch/bull-workers.js';
import { parsePartition } from '../models/redis/queue-partitions.js';
import type { Engine } from '../sdk/engines/types.js';
import { silentLogger } from '../sdk/worker/logger.js';
import { SwitchyardWorker } from '../sdk/worker/switchyard-worker.js';
import { TestGateway, cleanupPrefix, uniquePrefix, until } from './helpers/harness.js';

const KIND = 'inference:image:generate';

/** A worker that records every run it is leased, and holds each until `release`. */
function recordingWorker(gw: TestGateway, token: string, ran: string[], slots = 2) {
  const handler = (async (_kind, input) => {
    ran.push(String(input.prompt));
    return { artifacts: [] };
  }) as Engine;
  return new SwitchyardWorker({ gateway: gw.url, token, kinds: [KIND], slots, handler, logger: silentLogger });
}

/** The queue and priority of each job a gateway's dispatcher fetched, in order. */
function recordFetches(gw: TestGateway): Array<{ queue: string; priority: number }> {
  const taken: Array<{ queue: string; priority: number }> = [];
  const bull = (gw.dispatcher as unknown as { bull: BullWorkers }).bull;
  const fetch = bull.fetch.bind(bull);
  bull.fetch = async (queue, token) => {
    const job = await fetch(queue, token);
    if (job) taken.push({ queue, priority: job.priority });
    return job;
  };
  return taken;
}

/**
 * A hot queue split in QUEUE_PARTITIONS (docs/architecture.md, "Queue partitions"), end to end
 * on one Redis: runs go to the partition their id hashes to, callers see one queue (positions,
 * capacity), a worker drains every partition, the most urgent job first, each run once, and jobs queued under
 * another count, before or after a dispatcher started, are still leased.
 */
describe('Queue partitions: queueing and draining a split queue', function () {
  this.timeout(60_000);
  const prefix = uniquePrefix('partitions');
  const split = new TestGateway(prefix, { QUEUE_PARTITIONS: '3' });
  const unsplit = new TestGateway(prefix, { QUEUE_PARTITIONS: '1' });
  const ids = new Map<string, string>();
  let worker: SwitchyardWorker | undefined;

  before(async () => {
    await split.start();
    await unsplit.start();
  });
  after(async () => {
    await worker?.stop();
    await unsplit.stop();
    await split.stop();
    await cleanupPrefix(prefix);
  });

  it('queues each run in the partition its id hashes to, and shows callers one queue: positions and capacity', async () => {
    const { key } = await split.account();
    for (let i = 0; i < 30; i++) {
      const res = await split.submit(key, { kind: KIND, input: { prompt: `split-${i}` } });
      assert.equal(res.status, 202);
      ids.set(`split-${i}`, res.body.run_id);
    }
    // A gateway with one partition queues in the unsplit queue, as gateways before partitions did.
    for (let i = 0; i < 5; i++) ids.set(`unsplit-${i}`, (await unsplit.submit(key, { kind: KIND, input: { prompt: `unsplit-${i}` } })).body.run_id);
    const held = new Map<string, number>();
    for (const [prompt, runId] of ids) {
      const queue = (prompt.startsWith('split') ? split : unsplit).queues.queueOf({ run_id: runId, kind: KIND, confidentiality: 'open', input: {} });
      assert.ok(await split.queues.named(queue).getJob(runId), `${prompt} is in ${queue}`);
      held.set(queue, (held.get(queue) ?? 0) + 1);
    }
    const partitions = [...held.keys()].filter((q) => parsePartition(q)!.count === 3);
    assert.equal(partitions.length, 3, JSON.stringify([...held]));
    assert.equal(held.get(split.queues.queue(KIND, 'open').name), 5);
    // Heads of each partition are next (1st); the rest are estimated a partition's turn apart.
    const positions = await Promise.all([...ids].filter(([p]) => p.startsWith('split')).map(async ([, id]) => (await split.request('GET', `/v1/jobs/${id}`, { key })).body.queue_position as number));
    assert.equal(positions.filter((p) => p === 1).length, 3, JSON.stringify(positions));
    assert.ok(positions.every((p) => (p - 1) % 3 === 0), JSON.stringify(positions));
    // Capacity counts the kind's queue as the sum of its partitions and of the unsplit queue.
    await until('capacity counts 35 queued jobs of the kind', async () => (await split.request('GET', '/v1/network/capacity')).body.by_kind.find((k: { kind: string }) => k.kind === KIND).queued === 35);
  });

  it('leases every job of every partition, and of the unsplit queue, once, the most urgent first across them', async () => {
    const taken = recordFetches(split);
    const ran: string[] = [];
    worker = recordingWorker(split, await split.workerToken(), ran, 1);
    await worker.start();
    await until('every run succeeded', async () => {
      const runs = await Promise.all([...ids.values()].map((id) => split.stores.runs.get(id)));
      return runs.every((r) => r?.status === 'succeeded');
    });
    assert.equal(ran.length, ids.size, 'each run ran once');
    assert.equal(new Set(ran).size, ids.size);
    // One slot, every job queued before the worker came: each fetch took the most urgent head of
    // all the partitions (fair-share ranks and classes hold as in one queue), from every one of them.
    assert.equal(taken.length, ids.size);
    const priorities = taken.map((t) => t.priority);
    assert.deepEqual(priorities, [...priorities].sort((a, b) => a - b), JSON.stringify(taken));
    assert.equal(new Set(taken.map((t) => t.queue)).size, 4);
  });
});

describe('Queue partitions: a dispatcher that started before a gateway queued under a new count', function () {
  this.timeout(60_000);
  const prefix = uniquePrefix('partitions-new');
  // Its safety sweep, which reads the counts in use again, runs every second (LEASE_TTL_MS / 3).
  const draining = new TestGateway(prefix, { QUEUE_PARTITIONS: '1', LEASE_TTL_MS: '3000' });
  const queueing = new TestGateway(prefix, { QUEUE_PARTITIONS: '2' });
  let worker: SwitchyardWorker | undefined;

  before(async () => {
    await draining.start();
    await queueing.start();
  });
  after(async () => {
    await worker?.stop();
    await queueing.stop();
    await draining.stop();
    await cleanupPrefix(prefix);
  });

  it('routes its workers to the new partitions at its next sweep, and they run the jobs queued there', async () => {
    const ran: string[] = [];
    worker = recordingWorker(draining, await draining.workerToken(), ran);
    await worker.start();
    await until('the worker is attached', async () => draining.dispatcher.localWorkers()[0]);
    const { key } = await queueing.account();
    const runIds: string[] = [];
    for (let i = 0; i < 10; i++) runIds.push((await queueing.submit(key, { kind: KIND, input: { prompt: `p-${i}` } })).body.run_id);
    await until('every run succeeded on the worker of the other gateway', async () => {
      const runs = await Promise.all(runIds.map((id) => queueing.stores.runs.get(id)));
      return runs.every((r) => r?.status === 'succeeded');
    });
    assert.equal(ran.length, 10);
  });
});
