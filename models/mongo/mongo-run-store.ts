import { unitCost } from '../pricing.js';
import type { ClientSession, Collection, Filter, MongoClient } from 'mongodb';
import type { CreateRunResult, ListRunsQuery, PriorRunFields, RunPage, RunStore, RunTransition, TransitionResult } from '../stores.js';
import { mergeAttempt } from '../attempt-history.js';
import { fairRank } from '../fair-share.js';
import { NEW_RUN_DEFAULTS, isTerminal, type NewRun, type RunRecord } from '../types.js';
import type { AccountDoc } from './mongo-account-store.js';
import type { BatchMember, BatchRecord, CreateBatchResult, NewBatch } from '../batch-types.js';
import { isDuplicateKey } from './mongo-errors.js';
import { ClaimLostError, markClaimCreated, type IdempotencyDoc } from './mongo-idempotency-store.js';

export interface MongoRunStoreOptions {
  /** Seconds a terminal run is kept. */
  retentionSeconds: number;
  /** In-flight runs of a kind per fair-share rank of an account of weight 1 (models/fair-share.ts). */
  fairShareStep: number;
}

/**
 * A run as stored: the run id is the `_id`, the input is JSON text. `unconfirmed_at` is set while the queue write is
 * unconfirmed (the outbox); `expires_at` is set when the run turns terminal, for the TTL index.
 */
export type RunDoc = Omit<RunRecord, 'run_id' | 'input' | 'expires_at'> & {
  _id: string;
  /** The input as the JSON text it arrived as: forwarded verbatim, whatever its keys ($-prefixed, dotted). */
  input_json: string;
  unconfirmed_at?: Date;
  /** The retention clock of a terminal run (the collection's TTL index), not the record's `expires_at`. */
  expires_at?: Date;
  /** The record's `expires_at` (a run not started by then expires: docs/jobs.md). */
  ttl_expires_at?: string | null;
  /** Counted in its account's `in_flight_by_kind` (runs made before that count are not taken off it). */
  kind_counted?: boolean;
};

/** A batch as stored: the batch id is the `_id`. */
export type BatchDoc = Omit<BatchRecord, 'batch_id'> & {
  _id: string;
  /** Set when one of its runs ends, for the collection's TTL index (the batch goes with its last run). */
  expires_at?: Date;
};

/** Copies the record's fields only, so `_id`, `unconfirmed_at` and `expires_at` never leak. */
function toRun(d: RunDoc): RunRecord {
  return {
    run_id: d._id,
    account_id: d.account_id,
    kind: d.kind,
    status: d.status,
    confidentiality: d.confidentiality,
    class: d.class,
    priority: d.priority,
    price: d.price,
    settlement: d.settlement,
    input: JSON.parse(d.input_json) as Record<string, unknown>,
    webhook: d.webhook ?? null,
    webhook_events_filter: d.webhook_events_filter ?? NEW_RUN_DEFAULTS.webhook_events_filter,
    input_files: d.input_files ?? {},
    warnings: d.warnings ?? [],
    idempotency_key: d.idempotency_key ?? null,
    created_at: d.created_at,
    started_at: d.started_at ?? null,
    finished_at: d.finished_at ?? null,
    progress: d.progress ?? null,
    attempts: d.attempts ?? 0,
    output: d.output ?? null,
    error: d.error ?? null,
    attestation: d.attestation ?? null,
    cancel_requested_at: d.cancel_requested_at ?? null,
    fence: d.fence ?? 0,
    worker_id: d.worker_id ?? null,
    batch_id: d.batch_id ?? null,
    ttl_s: d.ttl_s ?? null,
    timeout_s: d.timeout_s ?? null,
    expires_at: d.ttl_expires_at ?? null,
    timeout_at: d.timeout_at ?? null,
    max_attempts: d.max_attempts ?? null,
    retry_on_timeout: d.retry_on_timeout ?? false,
    attempt_history: d.attempt_history ?? [],
    rate: d.rate ?? null,
    usage: d.usage ?? null,
    charged: d.charged ?? null,
    ...(d.api_key_id ? { api_key_id: d.api_key_id } : {}),
  };
}

/** A new run's defaults as a document: `expires_at` is the collection's retention field there (`ttl_expires_at` holds the record's). */
const { expires_at: _ttlExpiry, ...RECORD_DEFAULTS } = NEW_RUN_DEFAULTS;

/**
 * Create and transition touch a run and its account together, so each runs in a multi-document
 * transaction: the MongoDB store therefore needs a replica set (a single-node one will do).
 */
function fromBatchDoc({ _id, expires_at: _expiry, ...rest }: BatchDoc): BatchRecord {
  return { batch_id: _id, ...rest };
}

export class MongoRunStore implements RunStore {
  constructor(
    private readonly client: MongoClient,
    private readonly runs: Collection<RunDoc>,
    private readonly accounts: Collection<AccountDoc>,
    private readonly opts: MongoRunStoreOptions,
    /** The batches (docs/jobs.md, "Batches"), `_id` the batch id. */
    private readonly batches?: Collection<BatchDoc>,
    /** The Idempotency-Key claims (mongo-idempotency-store.ts) a keyed create marks. */
    private readonly claims?: Collection<IdempotencyDoc>,
  ) {}

  /** Inside a create's transaction: aborts it (ClaimLostError) unless the key's claim still names `id`. */
  private async holdClaim(session: ClientSession, accountId: string, key: string | null, id: string): Promise<void> {
    if (key === null) return;
    if (!this.claims) throw new Error('MongoRunStore was built without the idempotency claims collection');
    if (!(await markClaimCreated(this.claims, session, accountId, key, id))) throw new ClaimLostError();
  }

  /** Runs `fn` in a transaction; the driver retries it on transient errors (write conflicts). */
  private inTransaction<T>(fn: (session: ClientSession) => Promise<T>): Promise<T> {
    return this.client.withSession((session) => session.withTransaction(fn));
  }

  async create(run: NewRun): Promise<CreateRunResult> {
    try {
      return await this.inTransaction((session) => this.createIn(session, run));
    } catch (err) {
      if (err instanceof ClaimLostError) return { outcome: 'claim_lost' };
      // A concurrent create of the same run id committed first; ours was rolled back whole.
      if (!isDuplicateKey(err)) throw err;
      const existing = await this.runs.findOne({ _id: run.run_id });
      if (!existing) throw err;
      return { outcome: 'exists', run: toRun(existing) };
    }
  }

  /**
   * The batch and its runs in one transaction: the account's total reserved with one guarded
   * update and the runs inserted with one insertMany, each with the fair-share priority a
   * `create` in turn would have given it. A refusal aborts it whole.
   */
  async createBatch(batch: NewBatch, runs: NewRun[]): Promise<CreateBatchResult> {
    const batches = this.batchCollection();
    const { batch_id, ...rest } = batch;
    try {
      return await this.inTransaction(async (session): Promise<CreateBatchResult> => {
        const existing = await batches.findOne({ _id: batch_id }, { session });
        if (existing) return { outcome: 'exists', batch: fromBatchDoc(existing) };
        const byKind: Record<string, number> = {};
        for (const run of runs) byKind[`in_flight_by_kind.${run.kind}`] = (byKind[`in_flight_by_kind.${run.kind}`] ?? 0) + 1;
        const before = await this.accounts.findOneAndUpdate(
          { _id: batch.account_id, credits: { $gte: batch.price } },
          { $inc: { credits: -batch.price, reserved: batch.price, in_flight: runs.length, ...byKind } },
          { session, returnDocument: 'before' },
        );
        if (!before) {
          const account = await this.accounts.findOne({ _id: batch.account_id }, { session });
          return account ? { outcome: 'insufficient_credits', available: account.credits } : { outcome: 'no_account' };
        }
        // The budget judges the total as a create judges one run's price; a refusal takes the reservation back: nothing changed.
        const spent = before.spent_period === batch.created_at.slice(0, 7) ? (before.spent ?? 0) : 0;
        if (before.budget != null && spent + before.reserved + batch.price > before.budget) {
          await this.accounts.updateOne({ _id: batch.account_id }, { $inc: { credits: batch.price, reserved: -batch.price, in_flight: -runs.length, ...Object.fromEntries(Object.entries(byKind).map(([k, n]) => [k, -n])) } }, { session });
          return { outcome: 'budget_exceeded', budget: before.budget, spent, reserved: before.reserved };
        }
        // Each run ranked as a create in turn would rank it: its kind's runs in flight before it.
        const ofKind: Record<string, number> = { ...before.in_flight_by_kind };
        const docs = runs.map((run) => {
          const n = Math.max(0, ofKind[run.kind] ?? 0);
          ofKind[run.kind] = n + 1;
          return this.newDoc({ ...run, batch_id }, run.priorityBase + fairRank(n, this.opts.fairShareStep, before.weight ?? 1));
        });
        await this.holdClaim(session, batch.account_id, batch.idempotency_key, batch_id);
        await batches.insertOne({ _id: batch_id, ...rest }, { session });
        await this.runs.insertMany(docs, { session });
        return { outcome: 'created', batch, runs: docs.map(toRun) };
      });
    } catch (err) {
      if (err instanceof ClaimLostError) return { outcome: 'claim_lost' };
      // A concurrent create of the same batch committed first; ours was rolled back whole.
      if (!isDuplicateKey(err)) throw err;
      const existing = await batches.findOne({ _id: batch_id });
      if (!existing) throw err;
      return { outcome: 'exists', batch: fromBatchDoc(existing) };
    }
  }

  async getBatch(batchId: string): Promise<BatchRecord | null> {
    const doc = await this.batchCollection().findOne({ _id: batchId });
    return doc ? fromBatchDoc(doc) : null;
  }

  async batchMembers(batch: BatchRecord): Promise<BatchMember[]> {
    const docs = await this.runs.find({ batch_id: batch.batch_id }, { projection: { _id: 1, status: 1 } }).toArray();
    return docs.map((d) => ({ run_id: d._id, status: d.status }));
  }

  private batchCollection(): Collection<BatchDoc> {
    if (!this.batches) throw new Error('this MongoDB run store was opened without its batches collection');
    return this.batches;
  }

  private async createIn(session: ClientSession, run: NewRun): Promise<CreateRunResult> {
    const existing = await this.runs.findOne({ _id: run.run_id }, { session });
    if (existing) return { outcome: 'exists', run: toRun(existing) };
    // Reserve first: the guard refuses a short balance, and the document before the update
    // gives the in-flight count of the kind that sets the fair-share rank (models/fair-share.ts).
    const before = await this.accounts.findOneAndUpdate(
      { _id: run.account_id, credits: { $gte: run.price } },
      { $inc: { credits: -run.price, reserved: run.price, in_flight: 1, [`in_flight_by_kind.${run.kind}`]: 1 } },
      { session, returnDocument: 'before' },
    );
    if (!before) {
      const account = await this.accounts.findOne({ _id: run.account_id }, { session });
      return account ? { outcome: 'insufficient_credits', available: account.credits } : { outcome: 'no_account' };
    }
    // The budget is judged on the account as it was before the reservation (as the Redis script
    // does); a refusal takes the reservation back in the same transaction: nothing changed.
    const spent = before.spent_period === run.created_at.slice(0, 7) ? (before.spent ?? 0) : 0;
    if (before.budget != null && spent + before.reserved + run.price > before.budget) {
      await this.accounts.updateOne({ _id: run.account_id }, { $inc: { credits: run.price, reserved: -run.price, in_flight: -1, [`in_flight_by_kind.${run.kind}`]: -1 } }, { session });
      return { outcome: 'budget_exceeded', budget: before.budget, spent, reserved: before.reserved };
    }
    const rank = fairRank(Math.max(0, before.in_flight_by_kind?.[run.kind] ?? 0), this.opts.fairShareStep, before.weight ?? 1);
    const doc = this.newDoc(run, run.priorityBase + rank);
    await this.holdClaim(session, run.account_id, run.idempotency_key, run.run_id);
    await this.runs.insertOne(doc, { session });
    return { outcome: 'created', run: toRun(doc) };
  }

  /** A new run's document, queued with its price reserved. */
  private newDoc(run: NewRun, priority: number): RunDoc {
    return {
      _id: run.run_id,
      account_id: run.account_id,
      kind: run.kind,
      status: 'queued',
      confidentiality: run.confidentiality,
      class: run.class,
      priority,
      kind_counted: true,
      ...(run.api_key_id ? { api_key_id: run.api_key_id } : {}),
      price: run.price,
      settlement: 'reserved',
      input_json: JSON.stringify(run.input),
      webhook: run.webhook,
      idempotency_key: run.idempotency_key,
      created_at: run.created_at,
      ...RECORD_DEFAULTS,
      rate: run.rate ?? null,
      webhook_events_filter: run.webhook_events_filter ?? NEW_RUN_DEFAULTS.webhook_events_filter,
      input_files: run.input_files ?? {},
      warnings: run.warnings ?? [],
      ttl_s: run.ttl_s ?? null,
      timeout_s: run.timeout_s ?? null,
      ttl_expires_at: run.expires_at ?? null,
      max_attempts: run.max_attempts ?? null,
      retry_on_timeout: run.retry_on_timeout ?? false,
      batch_id: run.batch_id ?? null,
      unconfirmed_at: new Date(Date.parse(run.created_at)),
    };
  }

  async get(runId: string): Promise<RunRecord | null> {
    const doc = await this.runs.findOne({ _id: runId });
    return doc ? toRun(doc) : null;
  }

  async transition<T extends RunTransition>(run: Pick<RunRecord, 'run_id' | 'account_id'>, t: T): Promise<TransitionResult<T>> {
    const result = await this.inTransaction((session) => this.transitionIn(session, run, t));
    if (!result.ok) return result as TransitionResult<T>;
    // A lean reply (`returning: 'none'`) costs nothing here to read back, but callers must not count on the record.
    const { run: record, prior } = result;
    return { ok: true, ...(t.returning !== 'none' && { run: record }), ...(t.returnPrior && { prior }) } as TransitionResult<T>;
  }

  private async transitionIn(
    session: ClientSession,
    run: Pick<RunRecord, 'run_id' | 'account_id'>,
    t: RunTransition,
  ): Promise<{ ok: true; run: RunRecord; prior: PriorRunFields } | { ok: false; run: RunRecord | null }> {
    const cur = await this.runs.findOne({ _id: run.run_id, account_id: run.account_id }, { session });
    if (!cur) return { ok: false, run: null };
    if (!t.from.includes(cur.status)) return { ok: false, run: toRun(cur) };
    if (t.fence !== undefined && (cur.fence ?? 0) !== t.fence) return { ok: false, run: toRun(cur) };
    // From the document, not toRun: that would parse the input on every transition.
    const prior: PriorRunFields = {
      status: cur.status,
      worker_id: cur.worker_id ?? null,
      attempts: cur.attempts ?? 0,
      fence: cur.fence ?? 0,
      started_at: cur.started_at ?? null,
      progress: cur.progress ?? null,
    };

    const set: Partial<RunDoc> = {};
    // Judged on the record before the transition, and ahead of `set`, which wins a field named in both (as in Redis).
    for (const [k, v] of Object.entries(t.setIfAbsent ?? {})) {
      if (v !== undefined && (cur[k as keyof RunDoc] ?? null) === null) Object.assign(set, { [k]: v });
    }
    // Undefined patch fields are skipped, as the Redis codec skips them.
    for (const [k, v] of Object.entries(t.set ?? {})) if (v !== undefined) Object.assign(set, { [k]: v });
    if (t.attempt) set.attempt_history = mergeAttempt(cur.attempt_history ?? [], t.attempt);
    let unsetUnconfirmed = false;
    if (t.to !== undefined && t.to !== cur.status) {
      set.status = t.to;
      if (isTerminal(t.to)) {
        // Concurrent transitions of this run write-conflict on its document and only one commits,
        // so the run turns terminal, and settles, exactly once.
        if (cur.settlement === 'reserved') {
          const succeeded = t.to === 'succeeded';
          // What the Redis script charges (settle_charge): the usage at the run's rate, at most its price; all of it without a rate or usage.
          const usage = t.set?.usage ?? null;
          const charge = !succeeded ? 0 : cur.rate && usage ? Math.min(cur.price, unitCost(cur.rate, usage)) : cur.price;
          const release = { reserved: -cur.price, in_flight: -1, credits: cur.price - charge, ...(cur.kind_counted ? { [`in_flight_by_kind.${cur.kind}`]: -1 } : {}) };
          const finished = /^(\d{4}-\d{2})/.exec(String(t.set?.finished_at ?? ''))?.[1];
          const acct = charge > 0 && finished ? await this.accounts.findOne({ _id: run.account_id }, { session, projection: { spent_period: 1 } }) : null;
          // A charge in a later month than the account's last starts that month's `spent` (docs/jobs.md, "Cost").
          const newMonth = acct && finished && (!acct.spent_period || finished > acct.spent_period);
          await this.accounts.updateOne(
            { _id: run.account_id },
            newMonth ? { $inc: release, $set: { spent: charge, spent_period: finished } } : { $inc: { ...release, spent: charge } },
            { session },
          );
          set.settlement = succeeded ? 'charged' : 'released';
          set.charged = charge;
        }
        unsetUnconfirmed = true;
        // A batch is kept as long as its runs: each run's end restarts its retention clock.
        if (cur.batch_id && this.batches) {
          await this.batches.updateOne({ _id: cur.batch_id }, { $set: { expires_at: new Date(Date.now() + this.opts.retentionSeconds * 1000) } }, { session });
        }
      }
    }
    // Like the Redis EXPIRE, naming a terminal `to` (re)starts the retention clock.
    if (t.to !== undefined && isTerminal(t.to)) set.expires_at = new Date(Date.now() + this.opts.retentionSeconds * 1000);

    if (Object.keys(set).length === 0 && !unsetUnconfirmed) return { ok: true, run: toRun(cur), prior };
    const updated = await this.runs.findOneAndUpdate(
      { _id: run.run_id },
      unsetUnconfirmed ? { $set: set, $unset: { unconfirmed_at: '' } } : { $set: set },
      { session, returnDocument: 'after' },
    );
    if (!updated) throw new Error(`run ${run.run_id} vanished inside its transition`);
    return { ok: true, run: toRun(updated), prior };
  }

  async list(accountId: string, q: ListRunsQuery): Promise<RunPage> {
    const filter: Filter<RunDoc> = { account_id: accountId };
    if (q.status) filter.status = q.status;
    if (q.kind) filter.kind = q.kind;
    if (q.batch_id) filter.batch_id = q.batch_id;
    if (q.before) filter._id = { $lt: q.before };
    // Run ids are ULIDs, so _id order is creation order; one extra document tells whether there
    // is more. Each filter has its index, {account_id, [status], [kind], _id} (MongoStores.ensureIndexes),
    // so the query reads the page and one more, whatever the account's other runs.
    const limit = Math.max(1, Math.floor(q.limit));
    const docs = await this.runs.find(filter).sort({ _id: -1 }).limit(limit + 1).toArray();
    const runs = docs.slice(0, limit).map(toRun);
    return { runs, next: docs.length > limit ? runs[runs.length - 1].run_id : null };
  }

  async listUnconfirmed(olderThanMs: number, limit: number): Promise<RunRecord[]> {
    // limit(0) would mean "no limit" to MongoDB.
    if (limit <= 0) return [];
    // `$exists` repeats the partial index's filter so the planner can use that index.
    const docs = await this.runs
      .find({ unconfirmed_at: { $exists: true, $lte: new Date(Date.now() - olderThanMs) } })
      .sort({ unconfirmed_at: 1 })
      .limit(limit)
      .toArray();
    return docs.map(toRun);
  }

  async confirmEnqueued(runIds: string[]): Promise<void> {
    if (runIds.length) await this.runs.updateMany({ _id: { $in: runIds }, unconfirmed_at: { $exists: true } }, { $unset: { unconfirmed_at: '' } });
  }
}
