import type { ConnectedWorker } from './connected-worker.js';

/**
 * Per queue, the workers attached to this instance that serve it and may have a free slot:
 * whom an announcement of the queue wakes. A superset, pruned as it is walked, kept in the
 * order the workers became ready, oldest first, so workers take turns.
 *
 * An announcement walks only as many entries as it wakes workers (plus the stale ones it
 * drops, each dropped once per time it was added), not every worker attached: with 5,000 idle
 * workers on an instance, a scan of them all on every submission was the dispatcher's one
 * per-request cost that grew with the fleet (bench/fleet.ts, docs/benchmarks.md "Fleet").
 */
export class ReadyWorkers {
  private readonly byQueue = new Map<string, Set<ConnectedWorker>>();

  /** The worker may take work from the queues it serves: it joins their sets (at the end, if not in them yet). */
  add(worker: ConnectedWorker): void {
    for (const queue of worker.served ?? []) {
      let ready = this.byQueue.get(queue);
      if (!ready) this.byQueue.set(queue, (ready = new Set()));
      ready.add(worker);
    }
  }

  /**
   * Takes up to `count` workers of the queue for which `usable` holds, oldest first, and moves
   * them to the end of the set: the next announcement goes to others first, but may still come
   * back to one while it fills (another job announced meanwhile must not wait for the sweep).
   * An unusable entry walked leaves the set: whatever made it so (full slots, a drain, a
   * cool-off, a lapsed attestation) ends with a fill, whose end puts it back.
   */
  take(queue: string, count: number, usable: (w: ConnectedWorker) => boolean): ConnectedWorker[] {
    const ready = this.byQueue.get(queue);
    if (!ready) return [];
    const taken: ConnectedWorker[] = [];
    for (const w of ready) {
      if (taken.length >= count) break;
      ready.delete(w);
      if (w.served?.has(queue) && usable(w)) taken.push(w);
    }
    // Added after the walk: a Set's iteration would visit an entry re-added during it.
    for (const w of taken) ready.add(w);
    if (ready.size === 0) this.byQueue.delete(queue);
    return taken;
  }

  /** The worker left: out of the sets of the queues it serves now (`prune` drops it from any older ones). */
  remove(worker: ConnectedWorker): void {
    for (const queue of worker.served ?? []) {
      const ready = this.byQueue.get(queue);
      if (ready?.delete(worker) && ready.size === 0) this.byQueue.delete(queue);
    }
  }

  /** Drops the entries for which `keep` fails (workers gone, or routed away from the queue). Run by the slow sweep. */
  prune(keep: (w: ConnectedWorker) => boolean): void {
    for (const [queue, ready] of this.byQueue) {
      for (const w of ready) if (!w.served?.has(queue) || !keep(w)) ready.delete(w);
      if (ready.size === 0) this.byQueue.delete(queue);
    }
  }

  /**
   * The sweep's pass: prunes the sets to the workers `attached`, puts back every worker that
   * `mayTake` more work, however it got out of them, and returns the queues those serve.
   */
  resync(workers: Iterable<ConnectedWorker>, attached: (w: ConnectedWorker) => boolean, mayTake: (w: ConnectedWorker) => boolean): string[] {
    this.prune(attached);
    const queues = new Set<string>();
    for (const w of workers) {
      if (!mayTake(w)) continue;
      this.add(w);
      for (const q of w.served ?? []) queues.add(q);
    }
    return [...queues];
  }
}

/**
 * How many of `count` announced jobs each woken worker is told to take: one each first (there
 * are no more candidates than jobs), then the rest one at a time to each in turn, up to its
 * free slots, so a burst spreads over workers before it fills any one.
 */
export function shareOut(candidates: readonly ConnectedWorker[], count: number): number[] {
  const shares = candidates.map(() => 1);
  let left = count - candidates.length;
  for (let progressed = true; left > 0 && progressed; ) {
    progressed = false;
    for (let k = 0; k < candidates.length && left > 0; k++) {
      if (shares[k] < candidates[k].info.slots - candidates[k].leases.size) {
        shares[k]++;
        left--;
        progressed = true;
      }
    }
  }
  return shares;
}
