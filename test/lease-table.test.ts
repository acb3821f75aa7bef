import assert from 'node:assert/strict';
import { readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import type { LeaseTable } from '../dispatch/lease-table.js';
import type { LeaseStore } from '../dispatch/lease-store.js';
import { RedisKeys } from '../models/redis/keys.js';
import { RawWorker } from './helpers/raw-worker.js';
import { TestGateway, cleanupPrefix, uniquePrefix, until } from './helpers/harness.js';

const KIND = 'inference:image:generate';

/**
 * The lease table (dispatch/lease-table.ts) is the one owner of the leases an instance holds and
 * of their records in Redis: a lease is recorded when it is made, its record and lock extended
 * by heartbeats, and both forgotten when it ends.
 */
describe('LeaseTable', function () {
  const prefix = uniquePrefix('lease-table');
  let gw: TestGateway;
  let table: LeaseTable;
  let records: LeaseStore;

  before(async () => {
    gw = await new TestGateway(prefix, { LEASE_TTL_MS: '3000', HEARTBEAT_MS: '200' }).start();
    table = (gw.dispatcher as unknown as { table: LeaseTable }).table;
    records = (table as unknown as { opts: { records: LeaseStore } }).opts.records;
  });
  after(async () => {
    await gw.stop();
    await cleanupPrefix(prefix);
  });

  it('holds a lease from its making to its end, with a record of the lease TTL that heartbeats extend and the end deletes', async () => {
    const { key } = await gw.account(100);
    const w = await new RawWorker(gw.url, await gw.workerToken()).connect();
    const { body } = await gw.submit(key);
    const lease = await w.lease();
    const held = table.get(lease.lease_id);
    assert.equal(held?.runId, body.run_id);
    assert.equal(table.ofRun(body.run_id), held);
    assert.equal(held!.worker.info.busy, 1);
    // The record lets any instance check the lease's upload token, which only the frame carried.
    assert.equal((await records.verifyUpload(lease.lease_id, lease.upload_token))?.run_id, body.run_id);
    assert.equal(await records.verifyUpload(lease.lease_id, 'not-the-token'), null);
    const recordKey = new RedisKeys(prefix).lease(lease.lease_id);
    const readAt = Date.now();
    const ttl = await gw.redis.pttl(recordKey);
    assert.ok(ttl > 0 && ttl <= 3000, `the record lives one lease TTL (${ttl} ms)`);
    // Heartbeats (every 200 ms) push it out again: left alone its TTL only falls, by the time
    // gone since it was read; a heartbeat puts it back above that by the time since the lease
    // was made (200 ms and more from the second one on). Comparing with the first reading
    // instead would need a poll to land within the few milliseconds that reading took. A record
    // gone (PTTL -2) was not extended.
    await until('a heartbeat extends the record', async () => {
      const now = await gw.redis.pttl(recordKey);
      return now > 0 && now > ttl - (Date.now() - readAt) + 100;
    });

    assert.equal((await w.complete(lease)).type, 'ack');
    await until('the record deleted', async () => (await gw.redis.exists(recordKey)) === 0);
    assert.equal(table.get(lease.lease_id), undefined);
    assert.equal(table.ofRun(body.run_id), undefined);
    assert.equal(held!.worker.info.busy, 0);
    w.terminate();
  });

  it('is the only writer of lease records (the handover only compare-and-sets the ones it adopts)', () => {
    const root = path.resolve(import.meta.dirname, '..');
    const writers: string[] = [];
    for (const dir of ['api', 'dispatch', 'models', 'queues']) {
      const walk = (d: string): void => {
        for (const e of readdirSync(path.join(root, d), { withFileTypes: true })) {
          const rel = `${d}/${e.name}`;
          if (e.isDirectory()) walk(rel);
          // Lease records are reached through LeaseStore (dispatch/lease-store.ts): only a file that
          // imports it can write them (models/uploaded-records.ts has a `records.delete` of its own).
          else if (rel.endsWith('.ts') && /lease-store\.js'/.test(readFileSync(path.join(root, rel), 'utf8')) && /\b(records|leases)\.(put|touch|delete|adopt)\(/.test(readFileSync(path.join(root, rel), 'utf8'))) writers.push(rel);
        }
      };
      walk(dir);
    }
    assert.deepEqual(writers.sort(), ['dispatch/lease-handover.ts', 'dispatch/lease-table.ts']);
  });

  it('a lease handed over is forgotten here, its record left for the instance the worker moves to', async () => {
    const { key } = await gw.account(100);
    const w = await new RawWorker(gw.url, await gw.workerToken()).connect({ protocol: [1, 2, 3, 4, 5], kinds: [KIND] });
    await gw.submit(key);
    const lease = await w.lease();
    const moved = table.handOver(lease.lease_id);
    assert.equal(moved?.id, lease.lease_id);
    assert.equal(table.get(lease.lease_id), undefined);
    assert.equal(moved!.worker.leases.has(lease.lease_id), false);
    assert.equal(await gw.redis.exists(new RedisKeys(prefix).lease(lease.lease_id)), 1);
    w.terminate();
  });
});
