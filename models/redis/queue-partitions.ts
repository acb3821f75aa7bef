import calculateSlot from 'cluster-key-slot';

/**
 * A hot queue split into partitions (QUEUE_PARTITIONS; docs/architecture.md, "Queue
 * partitions"): partition `k` of a queue split in `count` is the queue's name with `#<k>of<count>`
 * appended (`image.open#1of3`). A queue split in one is its plain name, as before partitions.
 * The count is in the name so that a partition's name, and with it its slot, never changes when
 * a deployment's count does: the jobs queued under the old count are still found where they are.
 */
export const PARTITION_SEPARATOR = '#';
/** The most partitions a queue may be split in. */
export const MAX_PARTITIONS = 64;

const SLOTS = 16384;
const SUFFIX = /#(\d+)of(\d+)$/;

/** The name of partition `index` of `queue` split in `count` (the name itself when `count` is 1). */
export function partitionName(queue: string, index: number, count: number): string {
  return count > 1 ? `${queue}${PARTITION_SEPARATOR}${index}of${count}` : queue;
}

/** The queue a partition's name was made from, its index and the count it was split in; a plain name is partition 0 of 1. */
export function parsePartition(name: string): { queue: string; index: number; count: number } | null {
  const m = SUFFIX.exec(name);
  if (!m) return name.includes(PARTITION_SEPARATOR) ? null : { queue: name, index: 0, count: 1 };
  const index = Number(m[1]);
  const count = Number(m[2]);
  if (count < 2 || count > MAX_PARTITIONS || index >= count || m[1] !== String(index) || m[2] !== String(count)) return null;
  return { queue: name.slice(0, m.index), index, count };
}

/**
 * The hash tag of a partition's keys on a Redis Cluster: its name, salted (`image.open#1of3.7`)
 * with the first salt whose slot falls within a quarter of a `count`-th of the slot space around
 * the middle of the `index`-th `count`-th. A cluster's slots are dealt to its primaries in equal
 * ranges (`redis-cli --cluster create` and managed services do so), so a queue split in as many
 * partitions as there are primaries has one on each, where names hashed at random would pile two
 * on one primary two times in three. Deterministic: every gateway finds the same tag. About
 * 2 x `count` slot computations, made once per partition per process.
 */
export function spacedPartitionTag(name: string, index: number, count: number): string {
  if (count <= 1) return name;
  const width = SLOTS / count;
  const centre = (index + 0.5) * width;
  for (let salt = 0; ; salt++) {
    const tag = `${name}.${salt}`;
    if (Math.abs(calculateSlot(tag) - centre) <= width / 4) return tag;
  }
}
