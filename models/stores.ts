import type { SwitchyardFile } from '../sdk/client/types.js';
import type { Account, AccountLimits, ApiKeyRecord, AttemptWrite, GateCheck, GateVerdict, ModelRecord, NewRun, Operator, OperatorTrust, RunPatch, RunRecord, RunStatus, WebhookSecret, WorkerTokenRecord } from './types.js';
import type { BatchMember, BatchRecord, CreateBatchResult, NewBatch } from './batch-types.js';
import type { BotRecord, BotSession, ConversationMessage, ConversationRecord, FlowRecord } from './bot-types.js';

/**
 * The store contract. Each resource has one interface; `RedisStores` and `MongoStores`
 * implement all of them and pass the same contract tests (test/store-contract.test.ts).
 */
export interface AccountStore {
  create(input: { name: string; credits: number }): Promise<Account>;
  get(id: string): Promise<Account | null>;
  /** Writes the given limits (a kind's limit null: removed); null for an unknown account. */
  setLimits(id: string, limits: Partial<Omit<AccountLimits, 'max_running_by_kind'>> & { max_running_by_kind?: Record<string, number | null> }): Promise<Account | null>;
  /** Adds `delta` (may be negative) to `credits`; refuses (returns null) if the balance would go below zero. Throws not_found for an unknown account. */
  adjustCredits(id: string, delta: number): Promise<Account | null>;
  /** Sets (or, with null, removes) the account's monthly budget. Throws not_found for an unknown account. */
  setBudget(id: string, budget: number | null): Promise<Account>;
  /**
   * The account's webhook signing secret. If it has none yet, `candidate` becomes it, atomically:
   * concurrent first reads all get the one that was stored first. Throws not_found for an unknown account.
   */
  webhookSecret(id: string, candidate: WebhookSecret): Promise<WebhookSecret>;
  /** Replaces the account's webhook signing secret. Throws not_found for an unknown account. */
  setWebhookSecret(id: string, secret: WebhookSecret): Promise<WebhookSecret>;
}

export interface ApiKeyStore {
  /** Stores a key record; `record.hash` is the sha256 of the key, the key itself is never stored. */
  insert(record: ApiKeyRecord, lookupId: string): Promise<void>;
  /** Finds a key by the lookup id embedded in the key string. */
  findByLookupId(lookupId: string): Promise<ApiKeyRecord | null>;
  list(accountId: string): Promise<ApiKeyRecord[]>;
  /** Marks the account's key revoked; returns null when the account has no such key. Revoking twice keeps the first time. */
  revoke(accountId: string, id: string): Promise<ApiKeyRecord | null>;
  /** Sets the key's `max_running` (null: the default); null for no such key of this account. */
  setMaxRunning(accountId: string, id: string, max: number | null): Promise<ApiKeyRecord | null>;
}

export interface OperatorStore {
  create(input: { name: string; trust: OperatorTrust }): Promise<Operator>;
  get(id: string): Promise<Operator | null>;
  setTrust(id: string, trust: OperatorTrust): Promise<Operator | null>;
  /** Every operator, oldest first (operators are few: the admin API lists them whole). */
  list(): Promise<Operator[]>;
}

export interface WorkerTokenStore {
  insert(record: WorkerTokenRecord, lookupId: string): Promise<void>;
  findByLookupId(lookupId: string): Promise<WorkerTokenRecord | null>;
  revoke(id: string): Promise<WorkerTokenRecord | null>;
}

/** The gate's refusal (and nothing created), or its go-ahead with what the create did. */
export type GatedCreateResult =
  | { gate: Exclude<GateVerdict, { outcome: 'allowed' }> }
  | { gate: Extract<GateVerdict, { outcome: 'allowed' }>; result: CreateRunResult };

export type CreateRunResult =
  | { outcome: 'created'; run: RunRecord }
  /** A run with this id exists already (an idempotent replay or a duplicate create). */
  | { outcome: 'exists'; run: RunRecord }
  | { outcome: 'insufficient_credits'; available: number }
  /** The account's monthly budget refused it: what it spent in the run's period and holds reserved. */
  | { outcome: 'budget_exceeded'; budget: number; spent: number; reserved: number }
  | { outcome: 'no_account' }
  /**
   * The run's Idempotency-Key no longer names it (the request that claimed it failed and
   * released it, and maybe another took it): nothing was made. The caller starts over from
   * the claim. Only a create with an `idempotency_key` answers this.
   */
  | { outcome: 'claim_lost' };

interface RunTransitionBase {
  /** The transition applies only if the run's status is one of these. */
  from: readonly RunStatus[];
  /** New status; omitted to patch fields only. */
  to?: RunStatus;
  /** The transition applies only if the run's current lease has this fencing number. */
  fence?: number;
  set?: RunPatch;
  /**
   * Written only where the run has no value yet (absent or null), judged on the record before
   * this transition: lets a caller keep the first `started_at` without reading the run first.
   * A field also in `set` takes `set`'s value.
   */
  setIfAbsent?: RunPatch;
  /** An entry of the run's attempt history written in the same step (`mergeAttempt`, models/attempt-history.ts). */
  attempt?: AttemptWrite;
  /**
   * Report the fields of `PriorRunFields` as they were before this transition wrote (on `ok`):
   * what a caller needs to undo it, without reading the run first.
   */
  returnPrior?: boolean;
  /**
   * Status listeners (the event log, webhooks) are handed the change before the transition
   * returns, in order with the run's other events, but not waited for: for a caller whose next
   * step does not depend on the event being logged (a lease going out to its worker), one
   * round trip fewer. @defaultValue true
   */
  awaitListeners?: boolean;
  /**
   * A status change (`to`) is also logged in the run's event log by the store itself, in the same
   * atomic step (stores with `logsStatusEvents`): its `status` event, and `done` after a terminal
   * status. The result's `statusLogged` says whether it was (a record made before the store could
   * is left to the caller). ObservedRunStore asks for it; other callers need not.
   */
  logStatus?: boolean;
}

/** The fields a transition reports as they were before it (`returnPrior`). */
export type PriorRunFields = Pick<RunRecord, 'status' | 'worker_id' | 'attempts' | 'fence' | 'started_at' | 'progress'>;

/**
 * `returning: 'none'`: a transition that succeeds returns no record (the store need not read it
 * back); a refused one still does. Only without `to`: status listeners (ObservedRunStore) need
 * the record of every status change.
 */
export type RunTransition = (RunTransitionBase & { returning?: 'record' }) | (RunTransitionBase & { returning: 'none'; to?: undefined });

type RecordOf<T> = (T extends { returning: 'none' } ? { run?: undefined } : { run: RunRecord }) & { statusLogged?: boolean };
type PriorOf<T> = T extends { returnPrior: true } ? { prior: PriorRunFields } : T extends { returnPrior?: false } ? { prior?: undefined } : { prior?: PriorRunFields };

/** What a transition `T` returns: typed so a caller cannot read a record or prior values it did not ask for. */
export type TransitionResult<T extends RunTransition = RunTransition> = T extends unknown
  ? ({ ok: true } & RecordOf<T> & PriorOf<T>) | { ok: false; run: RunRecord | null; prior?: undefined }
  : never;

export interface ListRunsQuery {
  status?: RunStatus;
  kind?: string;
  /** Only the runs of this batch (docs/jobs.md, "Batches"). */
  batch_id?: string;
  limit: number;
  /** Exclusive: list runs older than this run id. */
  before?: string;
}

/** A page of an account's runs matching a `ListRunsQuery`, newest first. */
export interface RunPage {
  runs: RunRecord[];
  /**
   * The `before` of the next page, or null when no older run matches: never null while one does,
   * whatever the account's other runs. A page may hold fewer than `limit` runs (none, even) with
   * more to come, when a store stops reading for this request; the next page goes on from there.
   */
  next: string | null;
}

export interface RunStore {
  /**
   * Creates the run, reserves its price from the account's credits and marks it unconfirmed
   * (not yet known to be in its queue), all in one atomic step. Create-if-absent by run_id.
   */
  create(run: NewRun): Promise<CreateRunResult>;
  /**
   * `create` behind the caller's request gate, in the same atomic step: nothing is created
   * (and no credit reserved) when the gate refuses. Absent from stores that cannot (MongoDB):
   * the caller then runs the gate on its own first.
   */
  createGated?(run: NewRun, gate: GateCheck): Promise<GatedCreateResult>;
  get(runId: string): Promise<RunRecord | null>;
  /** Every match, newest first, read from an index of the filter: its cost does not grow with the account's other runs. */
  list(accountId: string, query: ListRunsQuery): Promise<RunPage>;
  /**
   * Compare-and-set on the status. Reaching a terminal status settles the reservation exactly
   * once (charged on success, released otherwise), since a run becomes terminal only once.
   */
  transition<T extends RunTransition>(run: Pick<RunRecord, 'run_id' | 'account_id'>, t: T): Promise<TransitionResult<T>>;
  /** True when `transition` can log a status change in the same step (`logStatus`): the Redis store, given the event log's settings. */
  readonly logsStatusEvents?: boolean;
  /**
   * Runs created more than `olderThanMs` ago whose queue write is not confirmed (the outbox).
   * `part` (0 to `outboxParts` - 1) reads only that part of an outbox kept in parts (a Redis
   * Cluster's, one per account group): what the enqueue reconciler reads in turn, sweep by sweep.
   */
  listUnconfirmed(olderThanMs: number, limit: number, part?: number): Promise<RunRecord[]>;
  /** How many parts `listUnconfirmed` can read the outbox in (1, or absent: it is one). */
  readonly outboxParts?: number;
  /** Records that these runs are known to be in their queue (or no longer need to be). */
  confirmEnqueued(runIds: string[]): Promise<void>;
  /**
   * Creates the batch and all of its runs (each as `create` would, `batch_id` set), reserving
   * their total price, in one atomic step: all or nothing. Nothing is created when the batch id
   * exists (`exists`), the balance is short of the total or the account is gone.
   */
  createBatch(batch: NewBatch, runs: NewRun[]): Promise<CreateBatchResult>;
  getBatch(batchId: string): Promise<BatchRecord | null>;
  /** The status of each run of the batch still kept (runs past retention are gone). */
  batchMembers(batch: BatchRecord): Promise<BatchMember[]>;
}

export interface IdempotencyClaim {
  runId: string;
  fingerprint: string;
  /** True when this call made the claim; false when it found an earlier one. */
  claimed: boolean;
}

export interface IdempotencyStore {
  /** Atomically claims (accountId, key) for `runId`, or returns the claim that exists. */
  claim(accountId: string, key: string, fingerprint: string, runId: string, ttlMs: number): Promise<IdempotencyClaim>;
  /**
   * Drops the claim if it still names `runId` and no run or batch of that id was created (the
   * request that made it failed). Exclusive with a create of that id: a create carrying the key
   * (`idempotency_key`) makes its record only while the claim names it, and a claim whose record
   * exists is never released, so a key can never end up naming two runs.
   */
  release(accountId: string, key: string, runId: string): Promise<void>;
}

/** A custom tool as stored (api/services/tools/): its secrets sealed (AES-256-GCM) by the tool service, never in plain text. */
export interface StoredTool {
  /** `tool_` and a ULID, so ids sort by creation time. */
  id: string;
  account_id: string;
  name: string;
  description: string;
  kind: 'http' | 'webhook';
  method: string;
  url: string;
  inputSchema: Record<string, unknown>;
  auth: { type: 'bearer' } | null;
  created_at: string;
  /** Sealed secrets: the bearer token (`auth`), the signing secret (webhook tools). */
  secrets: { bearer_token?: string; signing_secret?: string };
}

export type CreateToolResult = 'created' | 'name_conflict' | 'limit_reached';

export interface ToolStore {
  /** Stores the tool unless its account has a tool of that name or `maxPerAccount` tools already, in one atomic step. */
  create(tool: StoredTool, maxPerAccount: number): Promise<CreateToolResult>;
  /** The account's tool; null when there is none or it belongs to another account. */
  get(accountId: string, id: string): Promise<StoredTool | null>;
  /** The account's tools, oldest first. */
  list(accountId: string): Promise<StoredTool[]>;
  /** Removes the account's tool and frees its name; null when the account has no such tool. */
  delete(accountId: string, id: string): Promise<StoredTool | null>;
  /**
   * The key check: a value sealed with the tool secret key, stored by the first gateway that
   * starts on this store. Stores `sealed` unless one is stored already, in one atomic step, and
   * returns the value stored, so a gateway can tell at start whether its key opens the secrets.
   */
  claimKeyCheck(sealed: string): Promise<string>;
  /** The stored key check; null before any gateway claimed one. */
  keyCheck(): Promise<string | null>;
  /**
   * One sealed secret of any tool, with what it was sealed for, or null when no tool holds one:
   * a store with secrets but no key check yet (made before there was one) is checked with it.
   */
  sampleSecret(): Promise<SampledSecret | null>;
}

/** A sealed tool secret and the tool and role it was sealed for (its context: `<tool id>:<role>`). */
export interface SampledSecret {
  toolId: string;
  role: 'bearer_token' | 'signing_secret';
  sealed: string;
}

/**
 * A file an account uploaded (`/v1/files`, docs/files.md): the wire shape the client reads, less
 * its URL (built from the gateway's address), plus where its bytes are in the artifact store.
 */
export interface FileRecord extends Omit<SwitchyardFile, 'url'> {
  account_id: string;
  artifact_id: string;
}

export type CreateFileResult = { created: true; usedBytes: number } | { created: false; usedBytes: number };

export interface FileStore {
  /**
   * Records the file and adds its size to its account's stored bytes, in one atomic step, unless
   * that would pass `quotaBytes`: then nothing is recorded. `usedBytes`: the account's total after.
   */
  create(file: FileRecord, quotaBytes: number): Promise<CreateFileResult>;
  /** The account's live file; null when unknown, another account's, or expired. */
  get(accountId: string, id: string): Promise<FileRecord | null>;
  /** The account's live files, newest first, after the file id `after` (exclusive) when given. */
  list(accountId: string, opts: { limit: number; after?: string }): Promise<FileRecord[]>;
  /** Removes the account's file and frees its bytes; null when the account has no such file. */
  delete(accountId: string, id: string): Promise<FileRecord | null>;
  /** Bytes the account's files hold now. */
  usedBytes(accountId: string): Promise<number>;
  /** Up to `limit` files (of any account) whose `expires_at` is at or before `now`, for the sweeper to delete. */
  expired(now: Date, limit: number): Promise<FileRecord[]>;
}

/**
 * What a worker or an operator says about a model: the fields of a ModelRecord they set. A
 * worker's `ranks` is the count of the rank it serves (absent or null: it serves the model
 * whole); `middle_ranks` is an operator's alone, and advertisements ignore it.
 */
export type ModelDescription = Pick<ModelRecord, 'kind' | 'id' | 'description' | 'input_schema'> & Partial<Pick<ModelRecord, 'ranks' | 'middle_ranks'>>;

/**
 * An advertisement refused because a model's rank count is not the catalogue's: `catalogue`
 * and `advertised` are the two counts (null: whole). Nothing of that advertisement is recorded.
 */
export interface RankConflict {
  kind: string;
  id: string;
  catalogue: number | null;
  advertised: number | null;
}

/**
 * The model catalogue (docs/models.md): every model ever advertised by a worker or declared by
 * an operator, per kind. Reads are by (kind, id) or by kind; the catalogue is small (thousands).
 */
export interface ModelStore {
  /**
   * Records models a worker advertises, at `at` (ISO time): a new one is added with
   * `first_seen = last_seen = at`; a known one gets `last_seen = at` and, unless an operator
   * declared it, the description and schema advertised (the latest advertisement wins). An
   * operator's declaration is never changed by a worker. One call may name many models.
   *
   * A model's rank count is never changed by a worker: a new model takes the advertised one,
   * and when a model of the call is known with another count (a ranked model advertised whole
   * counts too), the call records nothing and returns that conflict (the first found).
   */
  advertise(models: ModelDescription[], at: string): Promise<RankConflict | null>;
  /**
   * An operator declares a model ahead of any worker, or redeclares it: created, or its
   * description, schema, ranks and middle_ranks replaced, and from then on `declared` (workers
   * only refresh its `last_seen`). Returns the record and whether it was created.
   */
  declare(model: ModelDescription, at: string): Promise<{ record: ModelRecord; created: boolean }>;
  get(kind: string, id: string): Promise<ModelRecord | null>;
  /** Every model of `kind`, or of every kind, ordered by kind then id. */
  list(kind?: string): Promise<ModelRecord[]>;
  /** Forgets a model; true when it was there. A worker advertising it again brings it back, undeclared. */
  remove(kind: string, id: string): Promise<boolean>;
}

export interface Stores {
  accounts: AccountStore;
  apiKeys: ApiKeyStore;
  operators: OperatorStore;
  workerTokens: WorkerTokenStore;
  runs: RunStore;
  idempotency: IdempotencyStore;
  /** Custom tools (api/services/tools/). */
  tools: ToolStore;
  /** Bots, their flows and secure-mode sessions (api/services/bots/). */
  bots: BotStore;
  /** Bot conversations (the agent loop, api/services/bots/). */
  conversations: ConversationStore;
  /** Files accounts uploaded (`/v1/files`). */
  files: FileStore;
  /** The model catalogue (docs/models.md). */
  models: ModelStore;
  /** Throws if the backing database cannot be reached (used by /readyz). */
  ping(): Promise<void>;
  close(): Promise<void>;
}

export interface BotStore {
  /** Stores the bot and its published flow together. */
  create(bot: BotRecord, flow: FlowRecord): Promise<void>;
  get(id: string): Promise<BotRecord | null>;
  /** The account's bots, oldest first. */
  list(accountId: string): Promise<BotRecord[]>;
  /** Removes the account's bot and its flow; null when the account has no such bot. */
  delete(accountId: string, id: string): Promise<BotRecord | null>;
  getFlow(id: string): Promise<FlowRecord | null>;
  /** Stores a session under the sha256 of its token until `session.expires_at`. */
  createSession(tokenHash: string, session: BotSession): Promise<void>;
  /** The session of a token hash; null when unknown or expired. */
  findSession(tokenHash: string): Promise<BotSession | null>;
}

export interface ConversationStore {
  /** Creates an empty conversation, kept `ttlSeconds`. */
  create(conversation: Omit<ConversationRecord, 'messages'>, ttlSeconds: number): Promise<void>;
  get(id: string): Promise<ConversationRecord | null>;
  /**
   * Appends messages, keeps only the last `keep`, and restarts the conversation's lifetime, in
   * one atomic step; false (and nothing written) when the conversation is gone.
   */
  append(id: string, messages: ConversationMessage[], keep: number, ttlSeconds: number): Promise<boolean>;
}
