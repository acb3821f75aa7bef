import { createHash } from 'node:crypto';
import { ACCOUNT_GROUPS, accountGroup, groupOfId } from '../ids.js';
import { parsePartition, spacedPartitionTag } from './queue-partitions.js';

/** A key's hash tag as Redis reads it: the first `{`, then at least one character before the next `}`. */
export const HASH_TAG = /\{[^}]+\}/;

/**
 * Every Redis key the stores use, in one place.
 *
 * Placement on a Redis Cluster (docs/architecture.md, "Redis Cluster"): there the prefix carries
 * a hash tag (`{sy}`, api/main/config-schema.ts), and a tagged prefix is what spreads: the keys
 * that have a tag of their own (each BullMQ queue, each gateway instance's fleet counts, each
 * lease) take it, under the prefix with its braces dropped (`sy:q:{image.open}`: Redis hashes
 * a key by its first tag, so the prefix's must not come first); every other key shares the
 * prefix's slot, where the stores' multi-key scripts need them. Read from the prefix alone, so
 * every RedisKeys built from a deployment's prefix (a gateway's, a test's, a tool's) agrees. An
 * untagged prefix (one server) keeps every key under it.
 */
export class RedisKeys {
  /** The prefix with its braces dropped, under which the keys with a tag of their own go. */
  private readonly base: string;

  constructor(readonly prefix: string) {
    this.base = prefix.replace(/[{}]/g, '');
    this.spread = HASH_TAG.test(prefix);
  }

  /** Whether the keys with a tag of their own (queues, instances, leases) take it (a tagged prefix). */
  readonly spread: boolean;

  /**
   * The prefix of one BullMQ queue (BullMQ builds its keys below it: `<prefix>:<name>:wait`).
   * Untagged, every queue is under `<prefix>:q`. Spread, a queue's prefix is tagged with its
   * name (`sy:q:{image.open}`), so its keys share a slot of their own: BullMQ's scripts need
   * every key of a queue in one slot, and no script spans two queues.
   */
  queuePrefixOf = (queue: string): string => (this.spread ? `${this.base}:q:{${this.queueTag(queue)}}` : `${this.prefix}:q`);
  /** A queue's tag: its name, or a partition's slot-spaced tag (models/redis/queue-partitions.ts), made once. */
  private queueTag(queue: string): string {
    let tag = this.tags.get(queue);
    if (tag === undefined) {
      const at = parsePartition(queue);
      tag = at && at.count > 1 ? spacedPartitionTag(queue, at.index, at.count) : queue;
      this.tags.set(queue, tag);
    }
    return tag;
  }
  private readonly tags = new Map<string, string>();
  /** The replica-wait probe of a spread queue's slot (REDIS_WAIT_REPLICAS; models/replica-waiter.ts). */
  queueReplicaWaitProbe = (queue: string) => `${this.queuePrefixOf(queue)}:replica-wait`;

  /**
   * The prefix of an account group's keys when spread (models/ids.ts, `accountGroup`): under the
   * group's tag (`sy:{a7Q}`), so an account, its runs and its batches share a slot and a run's
   * create and settle stay one script. Untagged, `ofAccount` and `ofId` give the prefix itself.
   */
  private grouped(group: string): string {
    return `${this.base}:{a${group}}`;
  }
  /** The group prefix of an account's keys. */
  private ofAccount(accountId: string): string {
    return this.spread ? this.grouped(accountGroup(accountId)) : this.prefix;
  }
  /** The group prefix of a run's or batch's keys, read from its id (which carries its account's group). */
  private ofId(id: string): string {
    return this.spread ? this.grouped(groupOfId(id)) : this.prefix;
  }

  /** Whether a run's or batch's id is in an account's group (always, untagged): else it is not that account's. */
  inGroupOf(id: string, accountId: string): boolean {
    return !this.spread || groupOfId(id) === accountGroup(accountId);
  }

  account = (id: string) => `${this.ofAccount(id)}:acct:${id}`;
  accountKeys = (id: string) => `${this.prefix}:acct:${id}:keys`;
  /**
   * Index of an account's runs (a sorted set, every score 0, so ordered by run id: by time).
   * One index per filter a listing takes narrows it, kept by the scripts that create runs and
   * change their status: `:s:<status>`, `:k:<kind>` and `:sk:<status>:<kind>` (`accountRunIndex`).
   */
  accountRuns = (id: string) => `${this.ofAccount(id)}:acct:${id}:runs`;
  /** The index that holds exactly the account's runs of a filter (`accountRuns` without one). */
  accountRunIndex = (id: string, filter: { status?: string; kind?: string }) => {
    const base = this.accountRuns(id);
    if (filter.status && filter.kind) return `${base}:sk:${filter.status}:${filter.kind}`;
    return filter.status ? `${base}:s:${filter.status}` : filter.kind ? `${base}:k:${filter.kind}` : base;
  };
  /**
   * The account's `:sk:` indexes filled in from `:s:` and `:k:` (a hash, field `<status>:<kind>`):
   * gateways before them kept only those two, so each is filled once before it is first read.
   */
  accountRunIndexesBuilt = (id: string) => `${this.ofAccount(id)}:acct:${id}:runs:built`;
  /** A batch (docs/jobs.md, "Batches"): a hash of `account_id` and the record as JSON (`doc`). */
  batch = (id: string) => `${this.ofId(id)}:batch:${id}`;
  /** Index of a batch's runs (a sorted set, every score 0, so by run id), read by listings with `batch_id`. */
  batchRuns = (id: string) => `${this.ofId(id)}:batch:${id}:runs`;
  apiKey = (lookupId: string) => `${this.prefix}:key:${lookupId}`;
  run = (runId: string) => `${this.ofId(runId)}:run:${runId}`;
  /** Capped list of a run's webhook delivery attempts, oldest first. */
  webhookAttempts = (runId: string) => `${this.ofId(runId)}:wh:${runId}`;
  /** Queued runs with a `ttl_s`, scored by when they expire (docs/jobs.md, "Deadlines"). */
  runsExpiring = () => `${this.prefix}:runs:expiring`;
  /**
   * Runs accepted whose queue write is not confirmed yet (the outbox), scored by creation time:
   * the one of the run's (or batch's) account group, written by its create script.
   */
  unconfirmed = (id: string) => `${this.ofId(id)}:runs:unconfirmed`;
  /** Every outbox the enqueue reconciler sweeps: the prefix's one, or spread, one per account group. */
  unconfirmedAll = (): readonly string[] => (this.outboxes ??= this.spread ? ACCOUNT_GROUPS.map((g) => `${this.grouped(g)}:runs:unconfirmed`) : [`${this.prefix}:runs:unconfirmed`]);
  /** `unconfirmedAll`, made once (1,024 keys spread, read every reconciler sweep). */
  private outboxes?: readonly string[];
  /** REDIS_WAIT_REPLICAS's probe write (models/replica-waiter.ts): in the slot of the writes it waits for. */
  replicaWaitProbe = () => `${this.prefix}:replica-wait`;
  /** The probe in the slot of a run's (or batch's) writes: its account group's (the prefix's probe, untagged). */
  replicaWaitProbeOf = (id: string) => `${this.ofId(id)}:replica-wait`;
  /** An Idempotency-Key's claim: JSON of the run (or batch) id it names and the request's fingerprint. */
  idempotency = (accountId: string, key: string) => `${this.ofAccount(accountId)}:idem:${accountId}:${createHash('sha256').update(key).digest('hex')}`;
  /** A custom tool: a hash of `account_id`, `name` and the record as JSON (`doc`). */
  tool = (id: string) => `${this.prefix}:tool:${id}`;
  /** An account's tools by name (name -> tool id): the name is unique per account, HLEN counts them. */
  accountTools = (id: string) => `${this.prefix}:acct:${id}:tools`;
  /** A value sealed with the tool secret key, so a gateway started with another key notices. */
  toolKeyCheck = () => `${this.prefix}:tools:key-check`;
  /** A bot as JSON; `accountBots` indexes an account's bots (a sorted set of ids, all scored 0, so in id order). */
  bot = (id: string) => `${this.prefix}:bot:${id}`;
  accountBots = (id: string) => `${this.prefix}:acct:${id}:bots`;
  /** A bot's flow as JSON. */
  flow = (id: string) => `${this.prefix}:flow:${id}`;
  /** A secure-mode bot session, by the sha256 of its token (expires with the session). */
  botSession = (tokenHash: string) => `${this.prefix}:botsess:${tokenHash}`;
  /** A conversation: a hash (`bot_id`, `created_at`) and the list of its messages (JSON), expiring together. */
  conversation = (id: string) => `${this.prefix}:conv:${id}`;
  conversationMessages = (id: string) => `${this.prefix}:conv:${id}:msgs`;
  operator = (id: string) => `${this.prefix}:op:${id}`;
  /** Index of every operator: a sorted set of ids, all scored 0, so in id (creation) order. */
  operators = () => `${this.prefix}:ops`;
  workerToken = (lookupId: string) => `${this.prefix}:wtok:${lookupId}`;
  workerTokenById = (id: string) => `${this.prefix}:wtok-id:${id}`;
  /**
   * An API key's rate limiter and its revocation marker, checked together on every request
   * (the requestGate script). Spread, under its account's group tag: a deployment's requests
   * spread over the primaries by account, and a submission's gate runs in its create's own
   * script there as on one server (gatedCreateRun), not as a script of its own before it.
   */
  keyRateLimit = (lookupId: string, accountId: string) => (this.spread ? `${this.ofAccount(accountId)}:key:${lookupId}:rl` : `${this.prefix}:rl:key:${lookupId}`);
  /** Marker set when an API key is revoked, checked on every request (the cache's safety net). */
  revokedKey = (lookupId: string, accountId: string) => (this.spread ? `${this.ofAccount(accountId)}:key:${lookupId}:revoked` : `${this.prefix}:revoked:${lookupId}`);
  /** A bot's rate limiters, of the bot and of one of its clients (checked together), under the bot's tag when spread. */
  botRateLimit = (botId: string, client?: string) => `${this.spread ? `${this.base}:bot:{${botId}}` : `${this.prefix}:rl:bot:${botId}`}${client === undefined ? '' : `:client:${client}`}`;
  /** A one-time console sign-in link, by the sha256 of its code: the account it signs in to (expires with the link). */
  consoleSignIn = (codeHash: string) => `${this.prefix}:signin:${codeHash}`;
  /** Pub/sub channel on which key revocations are announced to every gateway instance. */
  revocations = () => `${this.prefix}:chan:revocations`;

  /** An uploaded file's record (JSON). */
  file = (id: string) => `${this.prefix}:file:${id}`;
  /** Index of an account's files (a sorted set of ids, all scored 0, so in id order). */
  accountFiles = (id: string) => `${this.prefix}:acct:${id}:files`;
  /** Bytes an account's files hold, counted against FILE_QUOTA_BYTES. */
  accountFileBytes = (id: string) => `${this.prefix}:acct:${id}:file-bytes`;
  /** Every file by expiry (a sorted set scored by `expires_at` in ms), for the retention sweep. */
  filesByExpiry = () => `${this.prefix}:files:expiry`;

  /** The model catalogue of a kind: a hash of model id -> the record as JSON (docs/models.md). */
  models = (kind: string) => `${this.prefix}:models:kind:${kind}`;
  /** The kinds that have a catalogue hash, so listing every model needs no SCAN. */
  modelKinds = () => `${this.prefix}:models:kinds`;
  /** The BullMQ queues of jobs naming a model (a set of queue names), written before their first job. */
  modelQueues = () => `${this.prefix}:models:queues`;
  /** The partition counts (QUEUE_PARTITIONS) any gateway has queued jobs under, so every dispatcher drains their partitions. */
  queuePartitionCounts = () => `${this.prefix}:queues:partition-counts`;

  // Dispatch: leases, the fleet's counts and the channels that wake or stop dispatchers.
  /** A live lease (JSON, expiring with it): read by artifact uploads to check upload tokens. */
  lease = (leaseId: string) => (this.spread ? `${this.base}:lease:{${leaseId}}` : `${this.prefix}:lease:${leaseId}`);
  /** The gateway instances that may have workers attached (a sorted set scored by expiry). */
  fleetInstances = () => `${this.prefix}:fleet:instances`;
  /**
   * One instance's fleet counts (a hash: `total`, and per worker with an identity its share and
   * `i:<identity>`), rewritten on attach, lease, release and detach; expires on its own. Its
   * retired set (same hash tag) lists its workers that registered again elsewhere.
   */
  fleetCounts = (gatewayId: string) => `${this.spread ? this.base : this.prefix}:fleet:{${gatewayId}}:counts`;
  fleetRetired = (gatewayId: string) => `${this.spread ? this.base : this.prefix}:fleet:{${gatewayId}}:retired`;
  /** Channel: a queue has new jobs (payload: the queue name). */
  queuedChannel = () => `${this.prefix}:chan:queued`;
  /** Channel: a run was canceled (payload: the run id), so the instance holding its lease ends it. */
  cancelChannel = () => `${this.prefix}:chan:cancel`;
  /** Channel: a worker registered under an identity (payload: identity key, worker id, instance); older connections under it go. */
  workersChannel = () => `${this.prefix}:chan:workers`;
  /**
   * The free seats of a ranked model's rank workers, on every instance (a hash: worker id ->
   * `free expires-ms gateway rank count tiers`), which a pipeline is claimed from (docs/ranks.md).
   */
  rankSeats = (kind: string, model: string) => `${this.prefix}:ranks:${kind}:${model}:seats`;
  /** Channel of one instance's pipeline messages: rank assignments, activations, their acks, ends. */
  pipelineChannel = (gatewayId: string) => `${this.prefix}:chan:pipeline:${gatewayId}`;
  /** Channel: an operator's trust changed; every instance closes its own workers of that operator. */
  operatorsChannel = () => `${this.prefix}:chan:operators`;
  /**
   * The concurrency gate (dispatch/concurrency-gate.ts). A scope is what a limit counts: `a:<account>`,
   * `k:<api key id>` or `ak:<account>:<kind>`. Its running set holds the runs admitted in it (a
   * sorted set scored by when), its parked set the runs waiting for a slot in it (scored by
   * priority); the parked-runs hash says, per parked run, which parked set and queue it is in.
   */
  runningIn = (scope: string) => `${this.prefix}:cc:run:${scope}`;
  parkedIn = (scope: string) => `${this.prefix}:cc:park:${scope}`;
  parkedRuns = () => `${this.prefix}:cc:parked`;
  /** A nonce handed to a private worker, spent by the evidence that answers it. */
  attestationNonce = (nonce: string) => `${this.prefix}:att:nonce:${nonce}`;
  /** A private worker's current evidence, for audits. */
  attestationWorker = (workerId: string) => `${this.prefix}:att:worker:${workerId}`;

  // Live events (kept in Redis also when the stores are in MongoDB: fan-out plumbing, not records).
  /** Channel of a run's live events. */
  runEvents = (runId: string) => `${this.ofId(runId)}:ev:${runId}`;
  /** The run whose events channel this is (`runEvents`), or null. */
  runIdOfEvents = (channel: string): string | null => {
    const at = channel.lastIndexOf(':ev:');
    const id = at < 0 ? '' : channel.slice(at + 4);
    return id !== '' && this.runEvents(id) === channel ? id : null;
  };
  /** A run's event log: a capped stream whose entry ids are the event numbers. */
  runEventLog = (runId: string) => `${this.ofId(runId)}:evlog:${runId}`;
  /** The last event number a run's log used (same lifetime as the log). */
  runEventSeq = (runId: string) => `${this.ofId(runId)}:evseq:${runId}`;
  /** The last event of a run's log its `output` or `logs` webhook has carried (docs/webhooks.md). */
  webhookCursor = (runId: string, event: string) => `${this.ofId(runId)}:whcur:${runId}:${event}`;
  /** Protocol 4: the highest output `seq` logged per lease of a run (same lifetime as the log). */
  runDeltaSeq = (runId: string) => `${this.ofId(runId)}:evdseq:${runId}`;
}
