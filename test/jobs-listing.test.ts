import assert from 'node:assert/strict';
import { TestGateway, cleanupPrefix, newRunSpec, uniquePrefix, type Res } from './helpers/harness.js';
import { createMany, newestFirst } from './helpers/many-runs.js';

const IMAGE = 'inference:image:generate';
const RIG = 'inference:rig';

/**
 * `GET /v1/jobs` is complete (issue 28, "Listing that is complete"): a filter finds every match
 * of an account however many of its other runs there are, newest first, in pages whose cursor
 * ends only after the last one; and queued jobs in a listing say where they are in the queue.
 */
describe('jobs API: listing', function () {
  // 50,000 runs are written before the first test (a few seconds); the deadline is for slow machines.
  this.timeout(120_000);
  const prefix = uniquePrefix('jobs-listing');
  // The runs below are written straight to the store, not queued: the reconciler must not queue them.
  const gw = new TestGateway(prefix, { ENQUEUE_RECONCILE_AFTER_MS: String(3_600_000) });

  before(async () => gw.start());
  after(async () => {
    await gw.stop();
    await cleanupPrefix(prefix);
  });

  /** Every page of `GET /v1/jobs?query`, following `next_cursor` until it is null. */
  const pages = async (key: string, query: string) => {
    const out: Array<{ ids: string[]; next: string | null }> = [];
    for (let cursor: string | null = null; out.length < 100; ) {
      const res: Res = await gw.request('GET', `/v1/jobs?${query}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`, { key });
      assert.equal(res.status, 200, res.text);
      out.push({ ids: res.body.data.map((j: { run_id: string }) => j.run_id), next: res.body.next_cursor });
      cursor = res.body.next_cursor;
      if (cursor === null) return out;
    }
    throw new Error('the listing had not ended after 100 pages');
  };

  describe('a filter over 50,000 runs of which 3 match', () => {
    let key: string;
    let ids: string[];
    const rigs = [7, 25_000, 49_990];
    const canceled = [0, 30_000, 49_999];

    before(async () => {
      const account = await gw.account(1_000_000);
      key = account.key;
      // Through the store's own create, as a submission writes them (without their queue jobs).
      const specs = Array.from({ length: 50_000 }, (_, i) => newRunSpec(account.id, { kind: rigs.includes(i) ? RIG : IMAGE, price: 1 }));
      ids = await createMany(gw.stores.runs, specs, 1_000);
      for (const i of canceled) assert.equal((await gw.stores.runs.transition({ run_id: ids[i], account_id: account.id }, { from: ['queued'], to: 'canceled' })).ok, true);
    });

    const found = (p: Array<{ ids: string[] }>) => p.flatMap((page) => page.ids);

    it('finds all 3 by status, in pages of 2, newest first, and then ends', async () => {
      const p = await pages(key, 'status=canceled&limit=2');
      assert.deepEqual(found(p), newestFirst(ids, canceled));
      assert.equal(p[p.length - 1].next, null);
    });

    it('finds all 3 by kind the same way', async () => {
      const p = await pages(key, `kind=${RIG}&limit=2`);
      assert.deepEqual(found(p), newestFirst(ids, rigs));
      assert.equal(p[p.length - 1].next, null);
    });

    it('finds all 3 by status and kind together, though 49,997 runs have that status', async () => {
      const p = await pages(key, `status=queued&kind=${RIG}&limit=2`);
      assert.deepEqual(found(p), newestFirst(ids, rigs));
      assert.deepEqual(p.map((page) => page.ids.length), [2, 1], 'full pages: the index holds only the matches');
    });

    it('says where a listing ends for a filter nothing matches', async () => {
      assert.deepEqual(await pages(key, `status=canceled&kind=${RIG}&limit=2`), [{ ids: [], next: null }]);
    });
  });

  it('gives each queued job in a listing its queue position and waiting reason, as GET of the job does', async () => {
    const { key } = await gw.account(1_000);
    const submitted: string[] = [];
    for (const prompt of ['one', 'two', 'three']) submitted.push((await gw.submit(key, { kind: IMAGE, input: { prompt } })).body.run_id);
    assert.equal((await gw.request('POST', `/v1/jobs/${submitted[1]}/cancel`, { key })).status, 200);

    const listed = await gw.request('GET', '/v1/jobs', { key });
    assert.deepEqual(listed.body.data.map((j: { run_id: string }) => j.run_id), [...submitted].reverse());
    for (const job of listed.body.data) {
      const alone = (await gw.request('GET', `/v1/jobs/${job.run_id}`, { key })).body;
      assert.deepEqual(
        { queue_position: job.queue_position, waiting_reason: job.waiting_reason, waiting_ranks: job.waiting_ranks },
        { queue_position: alone.queue_position, waiting_reason: alone.waiting_reason, waiting_ranks: alone.waiting_ranks },
        job.run_id,
      );
    }
    const [third, second, first] = listed.body.data;
    assert.equal(second.queue_position, null, 'a canceled job has no place');
    assert.ok(Number.isInteger(first.queue_position) && first.queue_position >= 1, `first: ${first.queue_position}`);
    const partitions = gw.config.queuePartitions;
    if (partitions === 1) assert.equal(third.queue_position, first.queue_position + 1, 'the third is right behind the first, the second having left');
    // In a split queue (3 partitions by default on a cluster) each is placed from its own partition, a partition's turn apart.
    else for (const job of [first, third]) assert.equal((job.queue_position - 1) % partitions, 0, `${job.queue_position}`);
    assert.equal(first.waiting_reason, 'no_worker_for_kind');
  });
});
