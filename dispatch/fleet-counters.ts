import { RedisKeys } from '../models/redis/keys.js';
import { redisScripts } from '../models/redis/redis-scripts.js';
import type { RedisClient } from '../models/redis-connection.js';
import type { Logger } from 'pino';
import type { ConnectedWorker } from './connected-worker.js';
import { addSnapshot, emptySnapshot, workerShare, type FleetSnapshot } from './fleet-snapshot.js';
import { effectiveTier } from './worker-info.js';

export { workersServing, availableServing, rankCounts, rankKey, type ByTier, type FleetSnapshot, type KindCounts, type ModelCounts, type RankCounts } from './fleet-snapshot.js';

/** How far behind a reader's clock an index entry may be and still be read (its record's own expiry decides). */
const INDEX_SKEW_MS = 60_000;

export interface FleetCountersOptions {
  /** The connection the API reads with too: a write issued before a read on it is seen by that read. */
  redis: RedisClient;
  prefix: string;
  gatewayId: string;
  /** A dead instance's counts vanish this long after its last write or refresh (one heartbeat interval). */
  ttlMs: number;
  /** The workers attached to this instance now. */
  workers: () => Iterable<ConnectedWorker>;
  /** The leases a worker holds of one model of a kind (for `max_concurrency`). */
  leasesOf?: (worker: ConnectedWorker, kind: string, model: string) => number;
  log: Logger;
}

/**
 * The fleet's counts (workers, slots, busy slots, by kind and tier) as one small hash per
 * gateway instance: `total`, its counts, and for each worker that gave an identity (protocol 5)
 * its share (`s:<worker id>`) and `i:<identity>` naming it. An instance rewrites its hash after
 * every change it makes (attach, detach, lease, release, tier change; at most once per
 * event-loop turn), only the fields that changed, and refreshes its expiry (one heartbeat
 * interval) several times per interval, so a dead instance's workers drop out by themselves.
 *
 * A worker that registers again under its identity (its instance died, or its socket did)
 * retires its old entry first (`retireElsewhere`): readers take a retired worker's share off
 * its instance's total, so no worker is counted twice even while the dead instance's hash
 * lives. Readers sum the live instances' totals: a read costs one script per instance,
 * whatever the number of workers.
 */
export class FleetCounters {
  private lapseTimer?: NodeJS.Timeout;
  private stopped = false;
  /** Each counted worker's share of `total`, as last written. */
  private readonly parts = new Map<ConnectedWorker, FleetSnapshot>();
  private total = emptySnapshot();
  /** Workers whose share changed since the last write; `recountAll`: count every worker again. */
  private readonly dirty = new Set<ConnectedWorker>();
  /** Workers detached since the last write, whose shares and fields come off. */
  private readonly removed = new Set<ConnectedWorker>();
  private recountAll = true;
  /** The share and identity fields of this instance's hash, as last written (all but `total`). */
  private readonly written = new Map<string, string>();
  /** The index entry must be written again (first write, after a lapse). */
  private indexStale = true;
  /** A write failed: the next refresh writes the whole hash and the index entry again. */
  private lost = false;
  private flushing?: NodeJS.Immediate;
  /** Bumped by every change on this instance: a read may join one in flight only if none came since it began. */
  private generation = 0;
  private reading?: { generation: number; snapshot: Promise<FleetSnapshot> };

  private readonly keys: RedisKeys;

  constructor(private readonly opts: FleetCountersOptions) {
    this.keys = new RedisKeys(opts.prefix);
  }

  /** This instance's counts, from its attached workers as they are now (each one's share kept for later changes). */
  private local(now = Date.now()): FleetSnapshot {
    const s = emptySnapshot();
    this.parts.clear();
    let nextLapse = Infinity;
    for (const w of this.opts.workers()) {
      if (w.info.tier === 'private' && effectiveTier(w.info, now) === 'private') nextLapse = Math.min(nextLapse, Date.parse(w.info.attested_until!));
      const part = workerShare(w, now, this.opts.leasesOf);
      this.parts.set(w, part);
      addSnapshot(s, part, 1);
    }
    this.scheduleLapse(nextLapse - now);
    return s;
  }

  /**
   * Writes this instance's counts. A lease or release names its worker: only that worker's
   * share is counted again (a recount of every worker and model on each lease grew with the
   * fleet: 9–11% of the dispatcher's time with 100 models); so do `joined` and `left`. Any
   * other change recounts all.
   * The write waits for the end of this event-loop turn, so a burst of changes costs one;
   * `read()` on this instance issues a pending write first, so a read made after a change
   * sees it, as when every change was written at once.
   */
  changed(worker?: ConnectedWorker): void {
    if (this.stopped) return;
    this.generation++;
    if (!worker || this.recountAll) this.recountAll = true;
    else if (!this.removed.has(worker) && (this.parts.has(worker) || this.dirty.has(worker))) this.dirty.add(worker);
    // Else it is not attached here: not yet (it is counted whole when it joins), or no longer
    // (its leases are released after it left): its change counts nothing.
    else return;
    this.flushSoon();
  }

  /**
   * A worker attached here: its share is added to the counts, not every worker counted again,
   * so a registration costs the same with 5 workers attached or 5,000 (a full count per
   * registration made a reconnect storm quadratic). A private worker is the exception: the
   * full count is what times its evidence lapsing.
   */
  joined(worker: ConnectedWorker): void {
    if (this.stopped) return;
    if (worker.info.tier === 'private') return this.changed();
    this.generation++;
    if (!this.recountAll) this.dirty.add(worker);
    this.flushSoon();
  }

  /** A worker detached from here: its share and fields are taken off (see `joined`). */
  left(worker: ConnectedWorker): void {
    if (this.stopped) return;
    if (worker.info.tier === 'private') return this.changed();
    this.generation++;
    this.dirty.delete(worker);
    if (!this.recountAll && this.parts.has(worker)) this.removed.add(worker);
    this.flushSoon();
  }

  private flushSoon(): void {
    if (this.flushing) return;
    this.flushing = setImmediate(() => this.flush());
  }

  /** Issues the pending write, if any, on the shared connection (ahead of any command issued after it). */
  private flush(): void {
    if (!this.flushing) return;
    clearImmediate(this.flushing);
    this.flushing = undefined;
    if (this.stopped) return;
    const now = Date.now();
    const set: string[] = [];
    let gone: string[] = [];
    if (this.recountAll) {
      this.total = this.local(now);
      const fields = new Map<string, string>();
      for (const [w, part] of this.parts) {
        if (!w.identity) continue;
        fields.set(`s:${w.info.worker_id}`, JSON.stringify(part));
        fields.set(`i:${w.identity}`, w.info.worker_id);
      }
      for (const [field, value] of fields) if (this.written.get(field) !== value) set.push(field, value);
      for (const field of this.written.keys()) if (!fields.has(field)) gone.push(field);
    } else {
      for (const w of this.removed) {
        const part = this.parts.get(w);
        if (!part) continue;
        addSnapshot(this.total, part, -1);
        this.parts.delete(w);
        if (!w.identity) continue;
        if (this.written.has(`s:${w.info.worker_id}`)) gone.push(`s:${w.info.worker_id}`);
        // Unless a newer connection of the same worker took the identity over meanwhile.
        if (this.written.get(`i:${w.identity}`) === w.info.worker_id) gone.push(`i:${w.identity}`);
      }
      for (const w of this.dirty) {
        const prior = this.parts.get(w);
        const part = workerShare(w, now, this.opts.leasesOf);
        if (prior) addSnapshot(this.total, prior, -1);
        addSnapshot(this.total, part, 1);
        this.parts.set(w, part);
        if (!w.identity) continue;
        const field = `s:${w.info.worker_id}`;
        const value = JSON.stringify(part);
        if (this.written.get(field) !== value) set.push(field, value);
        if (this.written.get(`i:${w.identity}`) !== w.info.worker_id) set.push(`i:${w.identity}`, w.info.worker_id);
      }
      // An identity that left and came back in one turn is rewritten, not deleted.
      const rewritten = new Set(set.filter((_, i) => i % 2 === 0));
      gone = gone.filter((f) => !rewritten.has(f));
    }
    this.recountAll = false;
    this.dirty.clear();
    this.removed.clear();
    for (let i = 0; i < set.length; i += 2) this.written.set(set[i], set[i + 1]);
    for (const field of gone) this.written.delete(field);
    this.write(now, set, gone);
  }

  /**
   * `total` and the changed shares go in one HSET, so a reader never sees a total and a share
   * that disagree. Plain commands join the connection's auto-pipeline (a MULTI is a socket write
   * of its own); only a write that removes a worker's fields is a MULTI, since a reader seeing
   * the new total with the old share still marked retired would take it off twice.
   */
  private write(now: number, set: string[], gone: string[]): void {
    const { redis, ttlMs, gatewayId } = this.opts;
    const counts = this.keys.fleetCounts(gatewayId);
    const failed = (err: unknown) => {
      // What Redis holds is unknown now: the next refresh writes everything again.
      this.lost = true;
      this.opts.log.warn({ err }, 'could not write the fleet counts; the registry refresh writes them again');
    };
    const fields = ['total', JSON.stringify(this.total), ...set];
    if (gone.length > 0) {
      const retiredIds = gone.filter((f) => f.startsWith('s:')).map((f) => f.slice(2));
      const tx = redis.multi().hset(counts, ...fields).hdel(counts, ...gone);
      if (retiredIds.length > 0) tx.srem(this.keys.fleetRetired(gatewayId), ...retiredIds);
      tx.pexpire(counts, ttlMs).exec().catch(failed);
    } else {
      redis.hset(counts, ...fields).catch(failed);
      redis.pexpire(counts, ttlMs).catch(failed);
    }
    if (this.indexStale) {
      this.indexStale = false;
      redis.zadd(this.keys.fleetInstances(), now + ttlMs, gatewayId).catch(failed);
    }
  }

  /**
   * Keeps this instance's counts alive: their expiry and index entry pushed out by one TTL. Run
   * several times per TTL. Counts that lapsed meanwhile (an event loop stalled past the TTL, a
   * Redis restart) are written again whole.
   */
  async refresh(): Promise<void> {
    if (this.stopped) return;
    const { redis, ttlMs, gatewayId } = this.opts;
    const [alive] = await Promise.all([
      redis.pexpire(this.keys.fleetCounts(gatewayId), ttlMs),
      redis.pexpire(this.keys.fleetRetired(gatewayId), ttlMs),
      redis.zadd(this.keys.fleetInstances(), Date.now() + ttlMs, gatewayId),
    ]);
    if ((alive === 0 || this.lost) && !this.stopped) {
      this.lost = false;
      this.written.clear();
      this.indexStale = true;
      this.changed();
    }
  }

  /**
   * A worker registers under `identity`: any other instance counting a worker under it stops
   * being read as counting it, at once, whether that instance is alive or dead. Resolves once
   * done, so the new registration can be counted here without counting the worker twice.
   */
  async retireElsewhere(identity: string): Promise<void> {
    const { redis, ttlMs, gatewayId } = this.opts;
    const ids = await redis.zrangebyscore(this.keys.fleetInstances(), Date.now() - INDEX_SKEW_MS, '+inf');
    await Promise.all(
      ids.filter((id) => id !== gatewayId).map((id) => redisScripts.run(redis, 'retireFleetWorker', [this.keys.fleetCounts(id), this.keys.fleetRetired(id)], [`i:${identity}`, ttlMs])),
    );
  }

  /** A private worker's evidence lapsing changes its tier without any event: count it again then. */
  private scheduleLapse(inMs: number): void {
    clearTimeout(this.lapseTimer);
    this.lapseTimer = undefined;
    if (!Number.isFinite(inMs) || this.stopped) return;
    this.lapseTimer = setTimeout(() => this.changed(), Math.max(0, inMs) + 1).unref();
  }

  /** Stops writing and removes this instance's counts (a clean shutdown). */
  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.lapseTimer);
    if (this.flushing) clearImmediate(this.flushing);
    this.flushing = undefined;
    const { gatewayId } = this.opts;
    // Two steps, not one MULTI: on a cluster the instance's counts have a slot of their own. Out
    // of the index first; counts left by a stop cut short expire on their own.
    const { redis } = this.opts;
    await redis.zrem(this.keys.fleetInstances(), gatewayId).catch(() => {});
    await redis.del(this.keys.fleetCounts(gatewayId), this.keys.fleetRetired(gatewayId)).catch(() => {});
  }

  /**
   * This instance's own counts, current (a pending write is issued first): what its connected
   * workers serve, known without a round trip. The snapshot is shared: do not modify it.
   */
  localSnapshot(): FleetSnapshot {
    this.flush();
    return this.total;
  }

  /**
   * The fleet: every live instance's counts, summed. Reads made while one is in flight, with no
   * change on this instance since it began, share it (its round trips and its parsing): a burst
   * of chat completions checks the fleet once per round trip, not once per request. The
   * snapshot may be shared: callers must not modify it.
   */
  async read(): Promise<FleetSnapshot> {
    this.flush();
    if (this.reading?.generation === this.generation) return this.reading.snapshot;
    const reading = { generation: this.generation, snapshot: this.readNow() };
    this.reading = reading;
    try {
      return await reading.snapshot;
    } finally {
      if (this.reading === reading) this.reading = undefined;
    }
  }

  private async readNow(): Promise<FleetSnapshot> {
    const { redis } = this.opts;
    const now = Date.now();
    const index = this.keys.fleetInstances();
    // Liveness is each record's own expiry, kept by Redis's clock: the index only lists who may be alive.
    const ids = await redis.zrangebyscore(index, now - INDEX_SKEW_MS, '+inf');
    void redis.zremrangebyscore(index, '-inf', now - INDEX_SKEW_MS).catch(() => {});
    const total = emptySnapshot();
    if (ids.length === 0) return total;
    const replies = await Promise.all(ids.map((id) => redisScripts.run(redis, 'readFleetCounts', [this.keys.fleetCounts(id), this.keys.fleetRetired(id)], [])));
    for (const reply of replies) {
      if (!reply) continue;
      const [counts, ...retired] = reply;
      const s = JSON.parse(counts) as FleetSnapshot;
      for (const share of retired) addSnapshot(s, JSON.parse(share) as FleetSnapshot, -1);
      addSnapshot(total, s, 1);
    }
    return total;
  }
}
