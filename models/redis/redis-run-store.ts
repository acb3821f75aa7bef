import type { RedisClient } from '../redis-connection.js';
import { pubsub } from '../redis-pubsub.js';
import { runIdFloor } from '../ids.js';
import type { CreateRunResult, GatedCreateResult, ListRunsQuery, PriorRunFields, RunPage, RunStore, RunTransition, TransitionResult } from '../stores.js';
import type { BatchMember, BatchRecord, CreateBatchResult, NewBatch } from '../batch-types.js';
import { CREATE_BATCH_FIXED_ARGS, CREATE_BATCH_RUN_ARGS } from './scripts/create-batch.js';
import { isTerminal, NEW_RUN_DEFAULTS, type GateCheck, type GateVerdict, type NewRun, type RunRecord } from '../types.js';
import { gateCall, gateVerdict } from './gate-codec.js';
import type { RedisKeys } from './keys.js';
import { redisScripts } from './redis-scripts.js';
import { decodePrior, decodeRun, encodePatch, pairsToHash, PRIOR_FIELDS, viewFragment, type ImmutableRunFields } from './run-codec.js';

/** Account groups' outboxes a part of `listUnconfirmed` reads on a cluster (of 1,024). */
export const OUTBOX_GROUPS_PER_READ = 64;

export interface RedisRunStoreOptions {
  /** Seconds a terminal run is kept. */
  retentionSeconds: number;
  /** In-flight runs of a kind per fair-share rank for an account of weight 1 (models/fair-share.ts). */
  fairShareStep: number;
  /** The run event log's settings (models/run-event-log.ts): given, a transition can log its status change (`logStatus`). */
  eventLog?: { maxLength: number; ttlMs: number };
}

type Reply = [string, ...string[]];

/** Index ids a listing reads at most per request (or 20 per run of the page, if more): see `list`. */
const LIST_READ_BUDGET = 1000;
/** Records a listing reads per round trip, at most: it starts with one past the page and doubles. */
const LIST_BATCH_MAX = 500;
/** Runs a `buildRunIndex` call walks: a short script, so Redis serves others between chunks. */
const BUILD_CHUNK = 1000;

/**
 * What a create sent ahead of another library's commands did (`sendCreate`): as `createGated`
 * (or `create`, without a gate) answers, and, when it created the run, the account's runs of its
 * kind in flight with it and its share of a round (step × weight: models/fair-share.ts).
 */
export type PipedCreate =
  | { gate: Exclude<GateVerdict, { outcome: 'allowed' }> }
  | { gate?: Extract<GateVerdict, { outcome: 'allowed' }>; result: CreateRunResult; inFlight?: number; share?: number };

/** The account's runs of the kind in flight, and its share, that createRun's reply gives when it created the run. */
const inFlightOf = (reply: Reply): { inFlight?: number; share?: number } => (reply[0] === 'created' ? { inFlight: Number(reply[2]), share: Number(reply[3]) } : {});

/** What createRun's reply says happened. */
function createdFrom(reply: Reply, doc: ImmutableRunFields, rate?: NewRun['rate']): CreateRunResult {
  const [tag, ...rest] = reply;
  if (tag === 'no_account') return { outcome: 'no_account' };
  if (tag === 'claim_lost') return { outcome: 'claim_lost' };
  if (tag === 'insufficient') return { outcome: 'insufficient_credits', available: Number(rest[0]) };
  if (tag === 'budget') return { outcome: 'budget_exceeded', budget: Number(rest[0]), spent: Number(rest[1]), reserved: Number(rest[2]) };
  if (tag === 'exists') return { outcome: 'exists', run: decodeRun(pairsToHash(rest))! };
  // Built here rather than read back: the script only fixes the priority. Object.assign, not
  // spreads: V8 took ~15 us per job to spread these two objects into one (1 us this way), the
  // largest single cost of our own code in the submit benchmark's profile.
  const run = Object.assign({}, NEW_RUN_DEFAULTS, doc, { status: 'queued', settlement: 'reserved', priority: Number(rest[0]), rate: rate ?? null }) as RunRecord;
  return { outcome: 'created', run };
}

/** What gatedCreateRun's reply says happened: the gate's refusal, or its go-ahead and the create's result. */
function gatedFrom(reply: Reply | [number, number, number], doc: ImmutableRunFields, rate?: NewRun['rate']): GatedCreateResult {
  if (typeof reply[0] === 'number') return { gate: gateVerdict(reply as [number, number, number]) as Exclude<GateVerdict, { outcome: 'allowed' }> };
  const rest = reply as Reply;
  // The gate's two values come last, after createRun's own reply (whose length varies).
  const remaining = Number(rest[rest.length - 1]);
  const nextMs = Number(rest[rest.length - 2]);
  return { gate: { outcome: 'allowed', remaining, nextMs }, result: createdFrom(rest.slice(0, -2) as Reply, doc, rate) };
}

/** The gated and pipelined creates skip the claim check `create` makes: a keyed run never goes their way. */
function assertUnkeyed(run: NewRun): void {
  if (run.idempotency_key !== null) throw new Error('a run with an Idempotency-Key is made by create(), which checks its claim');
}

export class RedisRunStore implements RunStore {
  constructor(
    private readonly redis: RedisClient,
    private readonly keys: RedisKeys,
    private readonly opts: RedisRunStoreOptions,
  ) {}

  private indexFloor(): string {
    // A day of slack: an index entry outlives its run a little, never the other way round.
    return runIdFloor(Date.now() - (this.opts.retentionSeconds + 86_400) * 1000);
  }

  async create(run: NewRun): Promise<CreateRunResult> {
    const { keys, args, doc } = this.createCall(run);
    // A keyed run is made only while its key's claim names it (scripts/create-claimed-run.ts).
    if (run.idempotency_key !== null) {
      const claim = this.keys.idempotency(run.account_id, run.idempotency_key);
      return createdFrom(await redisScripts.run(this.redis, 'createClaimedRun', [...keys, claim], args), doc, run.rate);
    }
    return createdFrom(await redisScripts.run(this.redis, 'createRun', keys, args), doc, run.rate);
  }

  async createGated(run: NewRun, gate: GateCheck): Promise<GatedCreateResult> {
    assertUnkeyed(run);
    const { keys, args, doc } = this.createCall(run);
    const call = gateCall(this.keys, gate);
    return gatedFrom(await redisScripts.run(this.redis, 'gatedCreateRun', [...keys, ...call.keys], [...args, ...call.args]), doc, run.rate);
  }

  /** In-flight runs per fair-share rank (weight 1), as the create script is given it. */
  get fairShareStep(): number {
    return this.opts.fairShareStep;
  }

  /**
   * `create` (`createGated` when given the gate) sent at once on `redis`, a connection other
   * than the store's, so that what the caller sends on it right after (the run's BullMQ add,
   * queues/create-and-enqueue.ts) runs after the create, in the same round trip. Rejects with
   * the create's error, a NOSCRIPT included (`isNoScript`: the create did not run).
   */
  sendCreate(redis: RedisClient, run: NewRun, gate?: GateCheck): Promise<PipedCreate> {
    assertUnkeyed(run);
    const { keys, args, doc } = this.createCall(run);
    if (!gate) {
      return redisScripts.send(redis, 'createRun', keys, args).then((reply) => ({ result: createdFrom(reply, doc, run.rate), ...inFlightOf(reply) }));
    }
    const call = gateCall(this.keys, gate);
    return redisScripts.send(redis, 'gatedCreateRun', [...keys, ...call.keys], [...args, ...call.args]).then((reply): PipedCreate => {
      const gated = gatedFrom(reply, doc, run.rate);
      return 'result' in gated ? { ...gated, ...inFlightOf(reply as Reply) } : gated;
    });
  }

  /** createRun's keys and arguments, and the immutable fields it stores. */
  private createCall(run: NewRun): { keys: string[]; args: Array<string | number>; doc: ImmutableRunFields } {
    const { priorityBase, webhook_events_filter, input_files, warnings, ttl_s, timeout_s, expires_at, batch_id, max_attempts, retry_on_timeout, rate, ...fields } = run;
    // An undefined filter (or file map, or list) would hide the default when spread below.
    const doc: ImmutableRunFields = {
      ...fields,
      ...(webhook_events_filter && { webhook_events_filter }),
      ...(input_files && Object.keys(input_files).length > 0 && { input_files }),
      ...(warnings && warnings.length > 0 && { warnings }),
      ...(ttl_s != null && { ttl_s, expires_at }),
      ...(timeout_s != null && { timeout_s }),
      ...(max_attempts != null && { max_attempts }),
      ...(retry_on_timeout && { retry_on_timeout }),
      ...(batch_id != null && { batch_id }),
    };
    return {
      keys: [this.keys.run(run.run_id), this.keys.account(run.account_id), this.keys.accountRuns(run.account_id), this.keys.unconfirmed(run.run_id)],
      args: [
        run.run_id,
        run.account_id,
        run.price,
        JSON.stringify(doc),
        Date.parse(run.created_at),
        this.opts.fairShareStep,
        priorityBase,
        run.kind,
        this.indexFloor(),
        viewFragment(doc),
        run.created_at.slice(0, 7),
        rate ? JSON.stringify(rate) : '',
      ],
      doc,
    };
  }

  /**
   * The batch and its runs in one createBatch script: each run's arguments as `create` sends
   * them, so a batch run is stored exactly as a single one is.
   */
  async createBatch(batch: NewBatch, runs: NewRun[]): Promise<CreateBatchResult> {
    const calls = runs.map((run) => this.createCall({ ...run, batch_id: batch.batch_id }));
    const claim = batch.idempotency_key === null ? this.keys.batch(batch.batch_id) : this.keys.idempotency(batch.account_id, batch.idempotency_key);
    const keys = [this.keys.account(batch.account_id), this.keys.accountRuns(batch.account_id), this.keys.unconfirmed(batch.batch_id), this.keys.batch(batch.batch_id), this.keys.batchRuns(batch.batch_id), claim];
    const created = Date.parse(batch.created_at);
    const args: Array<string | number> = [batch.batch_id, batch.account_id, batch.price, created, this.opts.fairShareStep, this.indexFloor(), JSON.stringify(batch), batch.idempotency_key === null ? '' : '1'];
    for (const { keys: runKeys, args: a } of calls) {
      keys.push(runKeys[0]);
      // createCall's own order: run_id, account_id, price, doc, created, step, base, kind, floor, view, period, rate.
      args.push(a[0], a[2], a[3], a[6], a[7], a[9], a[10], a[11]);
    }
    if (args.length !== CREATE_BATCH_FIXED_ARGS + runs.length * CREATE_BATCH_RUN_ARGS) throw new Error('createBatch arguments out of step');
    const [tag, ...rest] = await redisScripts.run(this.redis, 'createBatch', keys, args);
    if (tag === 'no_account') return { outcome: 'no_account' };
    if (tag === 'claim_lost') return { outcome: 'claim_lost' };
    if (tag === 'insufficient') return { outcome: 'insufficient_credits', available: Number(rest[0]) };
    if (tag === 'budget') return { outcome: 'budget_exceeded', budget: Number(rest[0]), spent: Number(rest[1]), reserved: Number(rest[2]) };
    if (tag === 'exists') return { outcome: 'exists', batch: JSON.parse(rest[0]) as BatchRecord };
    const made = calls.map(({ doc }, i) => createdFrom(['created', rest[i + 1]], doc, runs[i].rate) as { run: RunRecord });
    return { outcome: 'created', batch, runs: made.map((m) => m.run) };
  }

  async getBatch(batchId: string): Promise<BatchRecord | null> {
    const doc = await this.redis.hget(this.keys.batch(batchId), 'doc');
    return doc ? (JSON.parse(doc) as BatchRecord) : null;
  }

  async batchMembers(batch: BatchRecord): Promise<BatchMember[]> {
    const pipeline = this.redis.pipeline();
    for (const id of batch.run_ids) pipeline.hget(this.keys.run(id), 'status');
    const replies = (await pipeline.exec()) ?? [];
    const members: BatchMember[] = [];
    replies.forEach(([err, status], i) => {
      if (err) throw err;
      if (status) members.push({ run_id: batch.run_ids[i], status: status as RunRecord['status'] });
    });
    return members;
  }

  async get(runId: string): Promise<RunRecord | null> {
    return decodeRun(await this.redis.hgetall(this.keys.run(runId)));
  }

  get logsStatusEvents(): boolean {
    return this.opts.eventLog !== undefined;
  }

  async transition<T extends RunTransition>(run: Pick<RunRecord, 'run_id' | 'account_id'>, t: T): Promise<TransitionResult<T>> {
    // Spread, a run id carries its account's group: another account's run is not in this one's
    // slot, and is as missing as it would be to the script.
    if (!this.keys.inGroupOf(run.run_id, run.account_id)) return { ok: false, run: null } as TransitionResult<T>;
    const set = encodePatch(t.set ?? {});
    const events = t.logStatus && t.to ? this.opts.eventLog : undefined;
    const reply = await redisScripts.run(
      this.redis,
      'transitionRun',
      [
        this.keys.run(run.run_id),
        this.keys.account(run.account_id),
        this.keys.accountRuns(run.account_id),
        this.keys.unconfirmed(run.run_id),
        this.keys.runEventLog(run.run_id),
        this.keys.runEventSeq(run.run_id),
      ],
      [
        `,${t.from.join(',')},`,
        t.to ?? '',
        this.opts.retentionSeconds,
        this.indexFloor(),
        run.run_id,
        run.account_id,
        t.fence ?? '',
        t.returning === 'none' ? 'none' : '',
        t.returnPrior ? '1' : '',
        set.length,
        events ? this.keys.runEvents(run.run_id) : '',
        pubsub.command(this.redis),
        events?.maxLength ?? '',
        events?.ttlMs ?? '',
        t.attempt ? JSON.stringify(t.attempt) : '',
        ...set,
        ...encodePatch(t.setIfAbsent ?? {}),
      ],
    );
    const [tag, ...rest] = reply;
    if (tag === 'missing') return { ok: false, run: null } as TransitionResult<T>;
    if (tag !== 'ok') return { ok: false, run: decodeRun(pairsToHash(rest))! } as TransitionResult<T>;
    const logged = rest.shift() === '1';
    const result: { ok: true; run?: RunRecord; prior?: PriorRunFields; statusLogged?: boolean } = logged ? { ok: true, statusLogged: true } : { ok: true };
    if (t.returnPrior) result.prior = decodePrior(rest.splice(0, PRIOR_FIELDS.length));
    if (t.returning !== 'none') result.run = decodeRun(pairsToHash(rest))!;
    // A batch is kept as long as its runs: each run's end sets its retention again, so it
    // expires with (about) its last run.
    const batchId = result.run?.batch_id;
    if (batchId && t.to && isTerminal(t.to)) {
      const ttl = this.opts.retentionSeconds;
      await this.redis.pipeline().expire(this.keys.batch(batchId), ttl).expire(this.keys.batchRuns(batchId), ttl).exec();
    }
    return result as TransitionResult<T>;
  }

  /**
   * Reads the index of the query's filter (RedisKeys.accountRunIndex), whose ids all match but
   * for runs expired since (pruned from it as found) and, while an older gateway still runs
   * beside this one, runs it moved: each record is checked against the filter again. One match
   * past the page says there is more. A request reads at most LIST_READ_BUDGET ids of the index
   * (so many runs expired at once cost several requests, not one long one) and then answers
   * what it found with a cursor that goes on from the last id it read.
   */
  async list(accountId: string, q: ListRunsQuery): Promise<RunPage> {
    const limit = Math.max(1, Math.floor(q.limit));
    const index = q.batch_id ? this.keys.batchRuns(q.batch_id) : this.keys.accountRunIndex(accountId, q);
    const budget = Math.max(limit * 20, LIST_READ_BUDGET);
    const runs: RunRecord[] = [];
    let cursor = q.before;
    let batch = Math.min(limit + 1, LIST_BATCH_MAX);
    for (let read = 0; ; ) {
      const ids = await this.indexIds(accountId, q, index, cursor, batch, read === 0);
      const pipeline = this.redis.pipeline();
      for (const id of ids) pipeline.hgetall(this.keys.run(id));
      const replies = ids.length ? ((await pipeline.exec()) ?? []) : [];
      const gone: string[] = [];
      let more = false;
      for (let i = 0; i < ids.length; i++) {
        const [err, hash] = replies[i];
        if (err) throw err;
        const record = decodeRun(hash as Record<string, string>);
        if (!record) gone.push(ids[i]);
        else if ((!q.kind || record.kind === q.kind) && (!q.status || record.status === q.status) && (!q.batch_id || record.account_id === accountId)) {
          if (runs.length === limit) {
            more = true;
            break;
          }
          runs.push(record);
        }
        cursor = ids[i];
      }
      read += ids.length;
      if (gone.length) await this.redis.zrem(index, ...gone);
      if (more) return { runs, next: runs[runs.length - 1].run_id };
      if (ids.length < batch) return { runs, next: null };
      if (read >= budget) return { runs, next: cursor ?? null };
      batch = Math.min(batch * 2, LIST_BATCH_MAX);
    }
  }

  /**
   * Up to `count` ids of `index` below `cursor`, newest first. A status-and-kind index is first
   * built (`buildRunIndex`) if no gateway has yet: the first read asks whether it was in the
   * same round trip.
   */
  private async indexIds(accountId: string, q: ListRunsQuery, index: string, cursor: string | undefined, count: number, first: boolean): Promise<string[]> {
    const range = ['BYLEX', 'REV', 'LIMIT', 0, count] as const;
    const max = cursor ? `(${cursor}` : '+';
    if (!first || !q.status || !q.kind || q.batch_id) return this.redis.zrange(index, max, '-', ...range);
    const marks = this.keys.accountRunIndexesBuilt(accountId);
    const field = `${q.status}:${q.kind}`;
    const [[builtErr, built], [rangeErr, ids]] = (await this.redis.pipeline().hexists(marks, field).zrange(index, max, '-', ...range).exec()) as [
      [Error | null, number],
      [Error | null, string[]],
    ];
    if (builtErr || rangeErr) throw builtErr ?? rangeErr;
    if (built) return ids;
    const from = [this.keys.accountRunIndex(accountId, { status: q.status }), this.keys.accountRunIndex(accountId, { kind: q.kind }), index, marks];
    for (let next = ''; ; ) {
      next = await redisScripts.run(this.redis, 'buildRunIndex', from, [field, next, BUILD_CHUNK]);
      if (next === '') break;
    }
    return this.redis.zrange(index, max, '-', ...range);
  }

  /**
   * The outbox of an untagged prefix is one key. Spread over a cluster there is one per account
   * group, read in OUTBOX_GROUPS_PER_READ at a time: `part` k reads groups 64k to 64k + 63, so
   * the enqueue reconciler, reading one part per sweep, costs an idle gateway a few dozen reads
   * a sweep rather than 1,024, and reads every group within 16 sweeps (40 s at the default
   * ENQUEUE_RECONCILE_AFTER_MS). Without `part`, every group (one auto-pipelined turn, a batch
   * per node). The runs' records are read the same way (they are in as many slots).
   */
  get outboxParts(): number {
    return Math.ceil(this.keys.unconfirmedAll().length / OUTBOX_GROUPS_PER_READ);
  }

  async listUnconfirmed(olderThanMs: number, limit: number, part?: number): Promise<RunRecord[]> {
    const before = Date.now() - olderThanMs;
    const all = this.keys.unconfirmedAll();
    const turn = part === undefined ? all : all.slice(part * OUTBOX_GROUPS_PER_READ, (part + 1) * OUTBOX_GROUPS_PER_READ);
    const lists = await Promise.all(turn.map((key) => this.redis.zrangebyscore(key, '-inf', before, 'LIMIT', 0, limit)));
    const ids = lists.flat().slice(0, limit);
    if (ids.length === 0) return [];
    const records = await Promise.all(ids.map((id) => this.redis.hgetall(this.keys.run(id))));
    const runs: RunRecord[] = [];
    const gone: string[] = [];
    records.forEach((h, i) => {
      const run = decodeRun(h);
      if (run) runs.push(run);
      else gone.push(ids[i]);
    });
    await this.confirmEnqueued(gone);
    return runs;
  }

  /** Takes the runs out of their outboxes (one ZREM per outbox they are in). */
  async confirmEnqueued(runIds: string[]): Promise<void> {
    const byOutbox = new Map<string, string[]>();
    for (const id of runIds) {
      const key = this.keys.unconfirmed(id);
      const ids = byOutbox.get(key);
      if (ids) ids.push(id);
      else byOutbox.set(key, [id]);
    }
    await Promise.all([...byOutbox].map(([key, ids]) => this.redis.zrem(key, ...ids)));
  }
}
