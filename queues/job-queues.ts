import { Job, Queue, type RedisClient as BullClient } from 'bullmq';
import type { RedisClient } from '../models/redis-connection.js';
import type { RunRecord } from '../models/types.js';
import { KINDS, TIERS, type Tier } from '../models/kinds.js';
import { parseQueueName, partitionNames, queueName, routedModel, runQueueName, unpartitioned } from './queue-names.js';
import type { QueuePartitionCounts } from './queue-partition-counts.js';

/** What a queued BullMQ job carries. The run record is the source of truth; this is a pointer to it. */
export interface QueuedJobData {
  run_id: string;
  account_id: string;
  kind: string;
  tier: Tier;
  /** The model it is routed by (docs/models.md); absent for a job naming none. */
  model?: string;
  /** When the run expires if not started (ms since the epoch; docs/jobs.md, "Deadlines"); absent: never. */
  expires?: number;
  /** Seconds each attempt may run; absent: unbounded. */
  timeout?: number;
  /** Leases the run may use (docs/jobs.md, "Attempts"); absent (a job queued before jobs set it): JOB_MAX_ATTEMPTS. */
  attempts?: number;
  /** A timed-out attempt is retried while attempts remain; absent: it fails the run. */
  retryTimeout?: true;
  /** The API key that submitted it, whose concurrency limit it counts against (dispatch/concurrency-gate.ts). */
  key?: string;
}

/** The leases a queued job may use: its own, else the gateway's setting. */
export const maxAttemptsOf = (data: Pick<QueuedJobData, 'attempts'>, fallback: number): number => data.attempts ?? fallback;

/** What a run's job is made of. */
export type QueuedRun = Pick<RunRecord, 'run_id' | 'account_id' | 'kind' | 'confidentiality' | 'priority' | 'input'> & Partial<Pick<RunRecord, 'expires_at' | 'timeout_s' | 'api_key_id' | 'max_attempts' | 'retry_on_timeout'>>;

/** A run in the sorted set of expiring runs: its queue, id and account (none holds a space). */
export const expiringMember = (queue: string, runId: string, accountId: string): string => `${queue} ${runId} ${accountId}`;

export function parseExpiringMember(member: string): { queue: string; runId: string; accountId: string } | null {
  const [queue, runId, accountId] = member.split(' ');
  return queue && runId && accountId ? { queue, runId, accountId } : null;
}

/** What says which queue a run is in (`JobQueues.queueOf`): its id (for its partition), kind, tier and model. */
export type QueuePlaceOf = Pick<RunRecord, 'run_id' | 'kind' | 'confidentiality' | 'input'>;

/** Where a queued run's job is (`JobQueues.place`). */
export interface QueuePlace {
  position: number | null;
  delayedUntil: number | null;
}

/** The pointers a run's job carries. */
function jobData(run: Omit<QueuedRun, 'priority'>): QueuedJobData {
  const model = routedModel(run.input);
  return { run_id: run.run_id, account_id: run.account_id, kind: run.kind, tier: run.confidentiality, ...(model ? { model } : {}), ...(run.expires_at ? { expires: Date.parse(run.expires_at) } : {}), ...(run.timeout_s ? { timeout: run.timeout_s } : {}), ...(run.api_key_id ? { key: run.api_key_id } : {}), ...(run.max_attempts ? { attempts: run.max_attempts } : {}), ...(run.retry_on_timeout ? { retryTimeout: true as const } : {}) };
}

export interface JobQueuesOptions {
  /** A non-blocking ioredis client, shared by every producer queue. */
  connection: RedisClient;
  /** Each queue's BullMQ key prefix (`RedisKeys.queuePrefixOf`: one for all, or one per queue on a cluster). */
  prefixOf: (queue: string) => string;
  /** A set of the model queues ever written to, so every instance can list them without a SCAN. */
  modelQueuesKey: string;
  /** QUEUE_PARTITIONS: the count jobs are queued under, recorded before the first, and every count used. Absent: queues are not split. */
  partitions?: QueuePartitionCounts;
  /** A sorted set of the queued runs with a `ttl_s`, by when they expire (`expiringMember`). */
  expiringKey?: string;
  /** Finished BullMQ jobs kept for Bull Board (run records keep the real history). */
  keepCompleted?: { age: number; count: number };
  keepFailed?: { age: number; count: number };
}

/**
 * The producer side of the queues: one BullMQ queue per kind x tier, and one per kind x tier x
 * model for jobs naming a model (made on first use), all sharing one connection, each split in
 * QUEUE_PARTITIONS partitions when more than one (a run in the one its id hashes to: `queueOf`).
 * The job id is the run id, so adding a run twice adds it once.
 */
export class JobQueues {
  private readonly queues = new Map<string, Queue<QueuedJobData>>();
  /** Model queues this process has recorded in the set of model queues. */
  private readonly recorded = new Set<string>();

  constructor(private readonly opts: JobQueuesOptions) {
    for (const { kind } of KINDS) for (const tier of TIERS) for (const name of partitionNames(queueName(kind, tier), [this.partitionCount])) this.named(name);
  }

  /** The count this gateway queues jobs under (QUEUE_PARTITIONS). */
  get partitionCount(): number {
    return this.opts.partitions?.own ?? 1;
  }

  /** The queue, or partition of a split queue, the run's job is in. */
  queueOf(run: QueuePlaceOf): string {
    return runQueueName(run, this.partitionCount);
  }

  /** A kind's, tier's and model's queue, unsplit: its only partition when QUEUE_PARTITIONS is 1, else its jobs are in `queueOf`'s. */
  queue(kind: string, tier: Tier, model?: string | null): Queue<QueuedJobData> {
    return this.named(queueName(kind, tier, model));
  }

  /** The queue of a name made by `queueName`. */
  named(name: string): Queue<QueuedJobData> {
    let queue = this.queues.get(name);
    if (!queue) {
      queue = new Queue<QueuedJobData>(name, {
        connection: this.opts.connection,
        prefix: this.opts.prefixOf(name),
        defaultJobOptions: {
          // Dispatch decides when a run has had its last attempt (its max_attempts, counted in
          // leases, stalls included) and then fails the job as unrecoverable; BullMQ's own
          // count must never end a job behind the run record's back.
          attempts: 1_000_000,
          removeOnComplete: this.opts.keepCompleted ?? { age: 24 * 3600, count: 1000 },
          removeOnFail: this.opts.keepFailed ?? { age: 7 * 24 * 3600, count: 5000 },
        },
      });
      // BullMQ re-emits connection errors here and prints them raw to stderr when nobody
      // listens; an outage already shows as failed commands (503s) and on /readyz.
      queue.on('error', () => {});
      this.queues.set(name, queue);
    }
    return queue;
  }

  /** The queues this process has opened (the kinds' default queues and the model queues it used). */
  all(): Queue<QueuedJobData>[] {
    return [...this.queues.values()];
  }

  /**
   * Every queue of the deployment: the kinds' default queues and every model queue any
   * instance has written to (one SMEMBERS), each partition of each under every partition count
   * any gateway has used (one SMEMBERS more), for Bull Board, metrics and capacity.
   */
  async known(): Promise<Queue<QueuedJobData>[]> {
    const [models] = await Promise.all([this.opts.connection.smembers(this.opts.modelQueuesKey), this.opts.partitions?.refresh()]);
    const counts = this.opts.partitions?.all ?? [1];
    const queues = new Set([...this.queues.keys()].map(unpartitioned));
    for (const name of models) if (parseQueueName(name)) queues.add(name);
    for (const queue of queues) for (const name of partitionNames(queue, counts)) this.named(name);
    return this.all();
  }

  async add(run: QueuedRun): Promise<void> {
    const queue = await this.recordedQueue(run);
    const expiring = this.noteExpiry(this.opts.connection, run);
    await queue.add(run.kind, jobData(run), { jobId: run.run_id, priority: run.priority });
    await expiring;
  }

  /**
   * `add` of many runs (a batch: docs/jobs.md, "Batches"): one `Queue.addBulk` per queue, which
   * BullMQ sends as one MULTI, and the expiry notes beside them, so a thousand jobs cost a few
   * round trips rather than a thousand.
   */
  async addMany(runs: QueuedRun[]): Promise<void> {
    const byQueue = new Map<Queue<QueuedJobData>, QueuedRun[]>();
    for (const run of runs) {
      const queue = await this.recordedQueue(run);
      const list = byQueue.get(queue);
      if (list) list.push(run);
      else byQueue.set(queue, [run]);
    }
    const expiring = runs.map((run) => this.noteExpiry(this.opts.connection, run));
    await Promise.all([
      ...[...byQueue].map(([queue, list]) => queue.addBulk(list.map((run) => ({ name: run.kind, data: jobData(run), opts: { jobId: run.run_id, priority: run.priority } })))),
      ...expiring,
    ]);
  }

  /**
   * A run with a `ttl_s` is noted, by when it expires, where every instance's sweeper finds it if
   * no worker takes it first (dispatch/run-deadlines.ts): sent on `client` at once, beside its add.
   */
  private noteExpiry(client: Pick<RedisClient, 'zadd'>, run: QueuedRun): Promise<unknown> | undefined {
    if (!run.expires_at || !this.opts.expiringKey) return undefined;
    return client.zadd(this.opts.expiringKey, Date.parse(run.expires_at), expiringMember(this.queueOf(run), run.run_id, run.account_id));
  }

  /** The connection the queues write on (one for all of them). */
  get connection(): RedisClient {
    return this.opts.connection;
  }

  /**
   * BullMQ's client of `connection` for the run's queue (ioredis's, wrapped, with BullMQ's
   * scripts defined on it), its queue recorded first among the model queues when it is one:
   * what `addNow` sends a run's add with.
   */
  async producer(run: QueuePlaceOf): Promise<BullClient> {
    return (await this.recordedQueue(run)).getBackend().client;
  }

  /**
   * Sends the add of a run's job at once with a client from `producer`, as `add` adds it:
   * BullMQ's public `Job.addJob`, given the client. Nothing is awaited before the command is
   * sent, so a command sent on the connection just before it runs before it, in the same round
   * trip (queues/create-and-enqueue.ts). Returns the job (to change its priority afterwards) and
   * the add's outcome.
   */
  addNow(client: BullClient, run: QueuedRun): { job: Job<QueuedJobData>; added: Promise<string> } {
    const queue = this.named(this.queueOf(run));
    const job = new Job<QueuedJobData>(queue, run.kind, jobData(run), { ...queue.defaultJobOptions, jobId: run.run_id, priority: run.priority }, run.run_id);
    const added = job.addJob(client);
    const expiring = this.noteExpiry(client as unknown as Pick<RedisClient, 'zadd'>, run);
    return { job, added: expiring ? Promise.all([added, expiring]).then(([id]) => id) : added };
  }

  /**
   * The run's queue (its partition), recorded first among the model queues when it is one, and
   * the partition count first among those used (each once per process).
   */
  private async recordedQueue(run: QueuePlaceOf): Promise<Queue<QueuedJobData>> {
    const model = routedModel(run.input);
    const name = queueName(run.kind, run.confidentiality, model);
    // Recorded before the job is added, so a listing or a dispatcher never misses a queue that holds a job.
    if (this.partitionCount > 1) await this.opts.partitions!.record();
    if (model && !this.recorded.has(name)) {
      await this.opts.connection.sadd(this.opts.modelQueuesKey, name);
      this.recorded.add(name);
    }
    return this.named(this.queueOf(run));
  }


  /**
   * Where a queued run is: its 1-based place among the waiting jobs of its queue (waiting jobs
   * without priority, then by priority and arrival), or null when it is not waiting; when it
   * waits out a retry's backoff instead, the time (ms) the backoff ends. Three O(log n) reads in
   * one round trip, no scan. In a queue split in P partitions, which dispatchers drain in turn,
   * a run r-th in its partition is estimated (r - 1) x P + 1st: 1st when it is next in its own.
   */
  async place(run: QueuePlaceOf): Promise<QueuePlace> {
    return (await this.places([run]))[0];
  }

  /**
   * `place` of each run (a page of a listing), all in one round trip: three reads per run, sent
   * in one turn on the auto-pipelined connection. Not an explicit pipeline: on a cluster the
   * runs' queues may be on several primaries, and ioredis sends one pipeline to one node (its
   * auto-pipelining writes one batch to each node instead).
   */
  async places(runs: QueuePlaceOf[]): Promise<QueuePlace[]> {
    const redis = this.opts.connection;
    return Promise.all(
      runs.map(async (run) => {
        const queue = this.named(this.queueOf(run));
        const [waiting, rank, delayed] = await Promise.all([redis.llen(queue.keys.wait), redis.zrank(queue.keys.prioritized, run.run_id), redis.zscore(queue.keys.delayed, run.run_id)]);
        // BullMQ scores a delayed job timestamp * 0x1000 + a counter (its getDelayedScore.lua).
        return { position: rank === null ? null : (waiting + rank) * this.partitionCount + 1, delayedUntil: delayed === null ? null : Math.floor(Number(delayed) / 0x1000) };
      }),
    );
  }

  /** Removes a waiting job; a job under lease stays (its worker is told to stop instead). */
  async remove(run: Pick<RunRecord, 'run_id' | 'account_id' | 'kind' | 'confidentiality' | 'input'>): Promise<boolean> {
    const queue = this.queueOf(run);
    // With its job goes its entry among the expiring runs, if it had one.
    if (this.opts.expiringKey) await this.opts.connection.zrem(this.opts.expiringKey, expiringMember(queue, run.run_id, run.account_id));
    return (await this.named(queue).remove(run.run_id)) === 1;
  }

  async close(): Promise<void> {
    await Promise.all(this.all().map((q) => q.close()));
  }
}
