import { setTimeout as sleep } from 'node:timers/promises';
import type { Job } from 'bullmq';
import type { RedisClient } from '../models/redis-connection.js';
import type { Logger } from 'pino';
import type { RedisKeys } from '../models/redis/keys.js';
import { redisScripts } from '../models/redis/redis-scripts.js';
import type { AccountStore, ApiKeyStore, RunStore } from '../models/stores.js';
import type { Account, ApiKeyRecord } from '../models/types.js';
import type { QueuedJobData } from '../queues/job-queues.js';
import type { BullWorkers } from './bull-workers.js';

export interface ConcurrencyGateOptions {
  redis: RedisClient;
  keys: RedisKeys;
  bull: Pick<BullWorkers, 'park' | 'job'>;
  runs: Pick<RunStore, 'get'>;
  accounts: Pick<AccountStore, 'get'>;
  apiKeys: Pick<ApiKeyStore, 'findByLookupId'>;
  /** ACCOUNT_MAX_RUNNING and KEY_MAX_RUNNING: the limits of accounts and keys that set none (0: none). */
  accountMaxRunning: number;
  keyMaxRunning: number;
  /** Announces a queue a parked job went back to. */
  announce(queue: string): Promise<void>;
  log: Logger;
  /** How long an account's or key's limits are trusted here: a change applies within this. @defaultValue 1000 */
  cacheMs?: number;
  /**
   * A parked job comes back on its own after this, should its unpark be lost (its gateway died
   * between taking it off the parked set and putting it back). Each time, every parked job is
   * fetched and judged again: a short period costs a fetch per parked job per period. @defaultValue 300000
   */
  recheckMs?: number;
  /** A run admitted longer ago than this and found not running no longer holds its slot. @defaultValue 10000 */
  staleAfterMs?: number;
}

/** A limit a run counts against: `a:<account>`, `k:<api key id>` or `ak:<account>:<kind>` (models/redis/keys.ts). */
interface Scope {
  name: string;
  limit: number;
}

/** Limit records cached at most; the least recently read go first. */
const CACHE_MAX = 10_000;
/** Admission times remembered at most (one per live lease; a lease handed to another instance leaves one behind). */
const ADMITTED_MAX = 100_000;
/** A scope's running set is checked for stale runs at most this often. */
const STALE_CHECK_EVERY_MS = 5_000;
/** Unparks tried in a row when the parked jobs found are gone (canceled, expired). */
const UNPARK_TRIES = 10;

/**
 * Hard concurrency limits (docs/jobs.md, "Limits and fairness"): per account, per API key and
 * per account and kind, counted across every gateway instance in Redis. A fetched job is
 * admitted only if each limited scope it counts against has a free slot (`admitRun`, one
 * script), else it is parked: out of its queue's wait list (BullMQ's delayed set, an attempt not
 * counted), so the fetch after it finds the next job, another account's included. A run that
 * leaves `running` here frees its slots and puts back the first job parked under each
 * (`releaseRun`). A slot held by a run that is not running any more (its gateway died between
 * admission and lease, or before the release) is found when a job is refused there, and freed.
 */
export class ConcurrencyGate {
  private readonly accounts = new Map<string, { at: number; value: Account | null }>();
  private readonly apiKeys = new Map<string, { at: number; value: ApiKeyRecord | null }>();
  private readonly staleChecked = new Map<string, number>();
  /** Scopes that refused a job here, and when: the sweep looks at them for stale runs. */
  private readonly refusedIn = new Map<string, { scope: Scope; at: number }>();
  private readonly recheckMs: number;
  /** When each lease made here (by its lock token) was admitted: its score in the running sets. */
  private readonly admittedAt = new Map<string, number>();
  private readonly cacheMs: number;

  constructor(private readonly opts: ConcurrencyGateOptions) {
    this.cacheMs = opts.cacheMs ?? 1000;
    this.recheckMs = opts.recheckMs ?? 300_000;
  }

  /** True when the job may run; false when it was parked (the caller fetches the next one). */
  async admit(queue: string, job: Job<QueuedJobData>, token: string): Promise<boolean> {
    const scopes = await this.scopes(job.data);
    if (scopes.length === 0) return true;
    const priority = job.priority ?? job.opts.priority ?? 0;
    const at = Date.now();
    const refused = await redisScripts.run(this.opts.redis, 'admitRun', this.scriptKeys(scopes), [job.data.run_id, at, queue, priority, ...scopes.map((s) => s.limit)]);
    if (refused === 0) {
      remember(this.admittedAt, token, at, ADMITTED_MAX);
      return true;
    }
    await this.opts.bull.park(queue, job, token, Date.now() + this.recheckMs);
    const scope = scopes[refused - 1];
    remember(this.refusedIn, scope.name, { scope, at: Date.now() }, CACHE_MAX);
    void this.checkStale(scope).catch((err: unknown) => this.opts.log.warn({ err }, 'could not check a concurrency limit for stale runs'));
    return false;
  }

  /**
   * The dispatcher's safety sweep: the scopes that refused a job here lately are checked for
   * slots held by runs no longer running, so a limit whose jobs are all parked (nothing fetched
   * there, nothing refused) is not left held by a dead gateway's runs.
   */
  sweep(): void {
    const since = Date.now() - this.recheckMs;
    for (const [name, { scope, at }] of this.refusedIn) {
      if (at < since) this.refusedIn.delete(name);
      else void this.checkStale(scope).catch((err: unknown) => this.opts.log.warn({ err }, 'could not check a concurrency limit for stale runs'));
    }
  }

  /**
   * The run left `running` here: its slots are freed and the job parked first under each comes
   * back. Given the lock token of the lease admitted here, only the slots that lease was given
   * (not those of a newer lease of the run elsewhere); without one (a lease adopted from another
   * instance, a run failed past its last attempt), whatever the run holds.
   */
  async release(data: QueuedJobData, token?: string): Promise<void> {
    const at = token === undefined ? undefined : this.admittedAt.get(token);
    if (token !== undefined) this.admittedAt.delete(token);
    try {
      const scopes = await this.scopes(data);
      if (scopes.length === 0) return;
      await this.unpark(scopes, await redisScripts.run(this.opts.redis, 'releaseRun', this.scriptKeys(scopes), [data.run_id, '', at === undefined ? '' : String(at)]));
    } catch (err) {
      this.opts.log.warn({ err, runId: data.run_id }, 'could not free a concurrency slot; it is freed when a job is next refused there');
    }
  }

  /** Which parked runs wait for a concurrency limit (their `waiting_reason`). */
  async parked(runIds: string[]): Promise<boolean[]> {
    if (runIds.length === 0) return [];
    const found = await this.opts.redis.hmget(this.opts.keys.parkedRuns(), ...runIds);
    return found.map((v) => v !== null);
  }

  /** The limited scopes the job counts against, with their limits (from records cached `cacheMs`). */
  private async scopes(data: QueuedJobData): Promise<Scope[]> {
    const [account, key] = await Promise.all([this.account(data.account_id), data.key ? this.apiKey(data.key) : null]);
    const out: Scope[] = [];
    const accountMax = account?.max_running ?? this.opts.accountMaxRunning;
    if (accountMax > 0) out.push({ name: `a:${data.account_id}`, limit: accountMax });
    const kindMax = account?.max_running_by_kind[data.kind];
    if (kindMax) out.push({ name: `ak:${data.account_id}:${data.kind}`, limit: kindMax });
    const keyMax = data.key ? (key?.max_running ?? this.opts.keyMaxRunning) : 0;
    if (keyMax > 0) out.push({ name: `k:${data.key}`, limit: keyMax });
    return out;
  }

  private scriptKeys(scopes: Scope[]): string[] {
    const k = this.opts.keys;
    return [k.parkedRuns(), ...scopes.flatMap((s) => [k.runningIn(s.name), k.parkedIn(s.name)])];
  }

  /**
   * Puts the unparked jobs (flat run id, queue pairs) back in their queues and announces them.
   * One gone meanwhile (canceled, expired) gives its turn to the next parked under the same scopes.
   */
  private async unpark(scopes: Scope[], entries: string[]): Promise<void> {
    for (let tries = 0; entries.length > 0 && tries < UNPARK_TRIES; tries++) {
      let gone = 0;
      for (let i = 0; i + 1 < entries.length; i += 2) {
        const [runId, queue] = [entries[i], entries[i + 1]];
        if (await this.promote(queue, runId)) await this.opts.announce(queue).catch(() => {});
        else gone++;
      }
      if (gone === 0) return;
      entries = await redisScripts.run(this.opts.redis, 'releaseRun', this.scriptKeys(scopes), ['', '1', '']);
    }
  }

  /**
   * Puts a parked job back in its queue; false when it is gone (canceled, expired, finished).
   * One parked a moment ago may not have reached the delayed set yet: it is waited for briefly.
   */
  private async promote(queue: string, runId: string): Promise<boolean> {
    const job = await this.opts.bull.job(queue, runId);
    if (!job) return false;
    for (let wait = 10; ; wait *= 2) {
      const state = await job.getState();
      if (state === 'waiting' || state === 'prioritized') return true;
      if (state !== 'delayed' && state !== 'active') return false;
      if (state === 'delayed') {
        try {
          await job.promote();
          return true;
        } catch (err) {
          this.opts.log.debug({ err, runId }, 'a parked job moved while being put back');
        }
      }
      // Still being parked by the instance that refused it: the recheck brings it back if this gives up.
      if (wait > 640) return state === 'active';
      await sleep(wait);
    }
  }

  /**
   * Frees the slots of runs admitted in the scope over `staleAfterMs` ago that are not running
   * (at most every few seconds per scope), and puts back as many parked jobs.
   */
  private async checkStale(scope: Scope): Promise<void> {
    const now = Date.now();
    if ((this.staleChecked.get(scope.name) ?? 0) > now - STALE_CHECK_EVERY_MS) return;
    remember(this.staleChecked, scope.name, now, CACHE_MAX);
    const running = this.opts.keys.runningIn(scope.name);
    const members = await this.opts.redis.zrangebyscore(running, '-inf', now - (this.opts.staleAfterMs ?? 10_000), 'WITHSCORES', 'LIMIT', 0, 100);
    const stale: string[] = [];
    for (let i = 0; i + 1 < members.length; i += 2) {
      const run = await this.opts.runs.get(members[i]);
      if (run?.status !== 'running') stale.push(members[i], members[i + 1]);
    }
    if (stale.length === 0) return;
    const dropped = await redisScripts.run(this.opts.redis, 'dropStaleRuns', [running], stale);
    this.opts.log.info({ scope: scope.name, dropped }, 'freed concurrency slots held by runs no longer running');
    for (let i = 0; i < dropped; i++) await this.unpark([scope], await redisScripts.run(this.opts.redis, 'releaseRun', this.scriptKeys([scope]), ['', '1', '']));
  }

  private async account(id: string): Promise<Account | null> {
    return this.cached(this.accounts, id, () => this.opts.accounts.get(id));
  }

  private async apiKey(id: string): Promise<ApiKeyRecord | null> {
    return this.cached(this.apiKeys, id, () => this.opts.apiKeys.findByLookupId(id.replace(/^key_/, '')));
  }

  private async cached<V>(map: Map<string, { at: number; value: V }>, id: string, read: () => Promise<V>): Promise<V> {
    const hit = map.get(id);
    if (hit && Date.now() - hit.at < this.cacheMs) return hit.value;
    const value = await read();
    remember(map, id, { at: Date.now(), value }, CACHE_MAX);
    return value;
  }
}

function remember<V>(map: Map<string, V>, key: string, value: V, max: number): void {
  map.delete(key);
  if (map.size >= max) map.delete(map.keys().next().value!);
  map.set(key, value);
}
