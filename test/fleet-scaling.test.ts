import assert from 'node:assert/strict';
import { Redis } from 'ioredis';
import type { ConnectedWorker } from '../dispatch/connected-worker.js';
import { ReadyWorkers } from '../dispatch/ready-workers.js';
import { REDIS_URL, TestGateway, cleanupPrefix, uniquePrefix, until } from './helpers/harness.js';
import { RawWorker } from './helpers/raw-worker.js';

const KIND = 'inference:image:generate';

/**
 * What an idle fleet costs must not grow with its size per request or per sweep (issue 31,
 * "A fleet of 100,000 workers"; bench/fleet.ts measures it). Counted here, never timed: the
 * Redis commands a sweep issues, seen with MONITOR, are the same for 1 worker and for 30; an
 * announcement walks as many ready workers as it wakes.
 */
describe('fleet scaling: costs that do not grow with the fleet', function () {
  this.timeout(60_000);

  describe('the safety sweep looks at each queue once, not once per worker', function () {
    const prefix = uniquePrefix('fleet-scaling');
    const gw = new TestGateway(prefix);
    const workers: RawWorker[] = [];
    let token: string;
    const scheduler = () => (gw.dispatcher as unknown as { scheduler: { sweep(): Promise<void> } }).scheduler;

    before(async () => {
      await gw.start();
      token = await gw.workerToken();
    });
    after(async () => {
      for (const w of workers) w.terminate();
      await gw.stop();
      await cleanupPrefix(prefix);
    });

    /** The queue reads (LLEN, ZCARD, ZCOUNT) of this gateway's keys during one sweep, seen with MONITOR. */
    async function sweepReads(): Promise<string[][]> {
      const client = new Redis(REDIS_URL);
      const monitor = await client.monitor();
      const seen: string[][] = [];
      const marker = `${prefix}:sweep-done:${Math.random()}`;
      let done = false;
      monitor.on('monitor', (_time: string, args: string[]) => {
        if (args[1] === marker) done = true;
        else if (!done && /^(llen|zcard|zcount)$/i.test(args[0] ?? '') && args[1]?.startsWith(`${prefix}:`)) seen.push(args);
      });
      try {
        await scheduler().sweep();
        // Commands run in order: once the marker (sent after the sweep's reads were answered) is seen, so were they.
        await gw.redis.exists(marker);
        await until('the marker reaches the monitor', async () => done);
      } finally {
        monitor.disconnect();
        client.disconnect();
      }
      return seen;
    }

    it('issues the same three reads for one idle worker and for thirty', async () => {
      workers.push(await new RawWorker(gw.url, token).connect({ kinds: [KIND], slots: 2 }));
      await until('the worker is attached', async () => gw.dispatcher.localWorkers().length === 1);
      const one = await sweepReads();
      assert.deepEqual(one.map((a) => a[0].toLowerCase()).sort(), ['llen', 'zcard', 'zcount']);

      workers.push(...(await Promise.all(Array.from({ length: 29 }, () => new RawWorker(gw.url, token).connect({ kinds: [KIND], slots: 2 })))));
      await until('all are attached', async () => gw.dispatcher.localWorkers().length === 30);
      const thirty = await sweepReads();
      // The command and its key (ZCOUNT's bound is the time of the sweep).
      const reads = (seen: string[][]) => seen.map((a) => `${a[0].toLowerCase()} ${a[1]}`).sort();
      assert.deepEqual(reads(thirty), reads(one), 'three reads of the one queue thirty workers serve');
    });

    it('counts a registering or leaving worker alone in the fleet counts, never every worker again', async () => {
      const opts = (gw.dispatcher.fleet as unknown as { opts: { workers: () => Iterable<ConnectedWorker> } }).opts;
      const all = opts.workers;
      let fullCounts = 0;
      opts.workers = () => (fullCounts++, all());
      try {
        const more = await Promise.all(Array.from({ length: 5 }, (_, i) => new RawWorker(gw.url, token).connect({ kinds: [KIND], slots: 2, protocol: [1, 2, 3, 4, 5], identity: `scaling-${i}` })));
        await until('all are attached', async () => gw.dispatcher.localWorkers().length === 35);
        assert.equal((await gw.dispatcher.fleet.read()).workers, 35);
        for (const w of more) w.close();
        await until('they are gone', async () => gw.dispatcher.localWorkers().length === 30);
        assert.equal((await gw.dispatcher.fleet.read()).workers, 30);
      } finally {
        opts.workers = all;
      }
      assert.equal(fullCounts, 0);
    });

    it('still leases a job the sweep finds waiting, to one worker', async () => {
      const { key } = await gw.account();
      // Every worker leaves the ready sets as if no announcement would reach it: only the sweep can.
      const ready = (gw.dispatcher as unknown as { scheduler: { ready: ReadyWorkers } }).scheduler.ready;
      ready.prune(() => false);
      const sub = await gw.submit(key, { kind: KIND, input: { prompt: 'found by the sweep' } });
      assert.equal(sub.status, 202);
      await scheduler().sweep();
      const leased = await until('a worker gets the lease', async () => workers.find((w) => w.leases().length > 0));
      assert.equal(leased.leases()[0].run_id, sub.body.run_id);
      assert.equal(workers.filter((w) => w.leases().length > 0).length, 1);
    });
  });

  describe('ReadyWorkers: an announcement walks what it wakes', function () {
    const fake = (i: number, queues = ['q']) => ({ info: { worker_id: `w${i}` }, served: new Set(queues) }) as unknown as ConnectedWorker;

    it('takes two of a thousand ready workers by looking at two, oldest first, and moves them last', function () {
      const ready = new ReadyWorkers();
      const all = Array.from({ length: 1_000 }, (_, i) => fake(i));
      for (const w of all) ready.add(w);
      let looked = 0;
      const taken = ready.take('q', 2, () => (looked++, true));
      assert.deepEqual(taken, [all[0], all[1]]);
      assert.equal(looked, 2);
      // Still there (a job announced while they fill may come back to them), after the others.
      const rest = ready.take('q', 1_000, () => true);
      assert.equal(rest.length, 1_000);
      assert.equal(rest[0], all[2]);
      assert.deepEqual(rest.slice(-2), [all[0], all[1]]);
    });

    it('drops the unusable ones it walks, and the removed, pruned or rerouted ones', function () {
      const ready = new ReadyWorkers();
      const [a, b, c, d] = [fake(1), fake(2), fake(3, ['q', 'r']), fake(4)];
      for (const w of [a, b, c, d]) ready.add(w);
      assert.deepEqual(ready.take('q', 1, (w) => w !== a), [b], 'a, full, is dropped on the way');
      ready.remove(b);
      ready.remove(c);
      assert.deepEqual(ready.take('r', 5, () => true), []);
      (d as { served: Set<string> }).served = new Set(['other']);
      assert.deepEqual(ready.take('q', 5, () => true), [], 'c was removed, d serves q no longer');
      ready.add(a);
      ready.prune((w) => w !== a);
      assert.deepEqual(ready.take('q', 5, () => true), []);
    });
  });
});
