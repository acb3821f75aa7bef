import assert from 'node:assert/strict';
import calculateSlot from 'cluster-key-slot';
import { newRunId } from '../models/ids.js';
import { KIND_NAMES } from '../models/kinds.js';
import { RedisKeys } from '../models/redis/keys.js';
import { parsePartition, partitionName, spacedPartitionTag } from '../models/redis/queue-partitions.js';
import { modelQueueKey, parseQueueName, partitionNames, queueName, runQueueName, unpartitioned } from '../queues/queue-names.js';

/** The primary of `slot` in a cluster whose slots are dealt in `primaries` equal ranges, as `redis-cli --cluster create` deals them. */
const primaryOf = (slot: number, primaries: number) => Math.min(primaries - 1, Math.floor(slot / Math.ceil(16384 / primaries)));

/**
 * Queue partitions (QUEUE_PARTITIONS; docs/architecture.md, "Queue partitions"): how a split
 * queue's partitions are named and read back, which partition a run is in, and where each
 * partition's keys land on a Redis Cluster.
 */
describe('Queue partitions: names, runs and slots', () => {
  const queue = queueName('inference:image:generate', 'open');
  const modelQueue = queueName('inference:llm:text-generate', 'trusted', 'org/model:7b');

  it('names partition k of P with #<k>of<P>, a count of 1 being the plain queue, and reads it back', () => {
    assert.equal(partitionName(queue, 0, 1), queue);
    assert.equal(partitionName(queue, 2, 3), `${queue}#2of3`);
    assert.deepEqual(parsePartition(`${queue}#2of3`), { queue, index: 2, count: 3 });
    assert.deepEqual(parsePartition(queue), { queue, index: 0, count: 1 });
    for (const bad of [`${queue}#3of3`, `${queue}#0of1`, `${queue}#01of3`, `${queue}#1of65`, `${queue}#`, `${queue}#x`]) assert.equal(parsePartition(bad), null, bad);
  });

  it('reads a partition as its queue: kind, tier and model; its model key and unsplit name', () => {
    const part = partitionName(modelQueue, 1, 4);
    assert.deepEqual(parseQueueName(part), { kind: 'inference:llm:text-generate', tier: 'trusted', model: 'org/model:7b' });
    assert.equal(modelQueueKey(part), modelQueueKey(modelQueue));
    assert.equal(unpartitioned(part), modelQueue);
    assert.equal(parseQueueName(`${queue}#9of3`), null);
  });

  it('lists every partition of every count in use once, the unsplit queue first', () => {
    assert.deepEqual(partitionNames(queue, [1, 3]), [queue, `${queue}#0of3`, `${queue}#1of3`, `${queue}#2of3`]);
    assert.deepEqual(partitionNames(queue, [1]), [queue]);
    assert.equal(new Set(partitionNames(queue, [1, 2, 4])).size, 7);
  });

  it('puts a run in the partition its id hashes to: always the same one, and runs spread evenly', () => {
    const counts = [0, 0, 0];
    for (let i = 0; i < 9_000; i++) {
      const run = { run_id: newRunId(`acct_${i % 7}`), kind: 'inference:image:generate', confidentiality: 'open' as const, input: {} };
      const name = runQueueName(run, 3);
      assert.equal(runQueueName(run, 3), name);
      counts[parsePartition(name)!.index]++;
    }
    for (const n of counts) assert.ok(n > 2_700 && n < 3_300, JSON.stringify(counts));
    assert.equal(runQueueName({ run_id: newRunId('acct_1'), kind: 'inference:image:generate', confidentiality: 'open', input: {} }, 1), queue);
  });

  it('places the P partitions of every kind a P-th of the slot space apart: one per primary of an evenly dealt cluster', () => {
    for (const primaries of [2, 3, 4, 6]) {
      for (const kind of KIND_NAMES) {
        for (const base of [queueName(kind, 'open'), queueName(kind, 'private', 'm')]) {
          const held = Array.from({ length: primaries }, (_, k) => primaryOf(calculateSlot(spacedPartitionTag(partitionName(base, k, primaries), k, primaries)), primaries));
          assert.deepEqual(held, [...Array(primaries).keys()], `${base} on ${primaries} primaries`);
        }
      }
    }
  });

  it('keys each partition under its spaced tag on a cluster, and under the shared queue prefix on one server', () => {
    const part = partitionName(queue, 1, 3);
    const spread = new RedisKeys('{sy}');
    assert.equal(spread.queuePrefixOf(part), `sy:q:{${spacedPartitionTag(part, 1, 3)}}`);
    assert.equal(spread.queuePrefixOf(queue), `sy:q:{${queue}}`);
    assert.equal(new RedisKeys('sy').queuePrefixOf(part), 'sy:q');
  });
});
