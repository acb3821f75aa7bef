import type { RedisClient } from '../../models/redis-connection.js';
import type { Logger } from 'pino';
import { createStores } from '../../models/create-stores.js';
import { ObservedRunStore } from '../../models/observed-run-store.js';
import { createRedis } from '../../models/redis-connection.js';
import { RedisKeys } from '../../models/redis/keys.js';
import { RedisRunStore } from '../../models/redis/redis-run-store.js';
import { ReplicaWaiter } from '../../models/replica-waiter.js';
import { RunDurability } from '../../models/run-durability.js';
import { RunEventLog } from '../../models/run-event-log.js';
import type { Stores } from '../../models/stores.js';
import { isTerminal } from '../../models/types.js';
import { CreateAndEnqueue } from '../../queues/create-and-enqueue.js';
import { QueuePartitionCounts } from '../../queues/queue-partition-counts.js';
import { JobQueues } from '../../queues/job-queues.js';
import type { Config } from '../main/config.js';
import { ApiKeyAuthenticator } from '../services/auth/api-key-authenticator.js';
import { RequestGate } from '../services/auth/request-gate.js';
import { RunEventHub } from '../services/events/run-event-hub.js';
import { RunEventWriter } from '../services/events/run-event-writer.js';
import { BatchEventWriter } from '../services/events/batch-event-writer.js';
import { GatewayMetrics } from '../services/metrics/gateway-metrics.js';
import type { Lifecycle } from './lifecycle.js';
import { PublicUrl } from './public-url.js';

/** What every capability of a gateway process builds on. */
export interface Core {
  config: Config;
  log: Logger;
  gatewayId: string;
  publicUrl: PublicUrl;
  /** Request paths' connection: fails fast in an outage, pipelines concurrent commands. */
  redis: RedisClient;
  /** The process's one subscriber connection (run events, dispatch, trust changes). */
  subscriber: RedisClient;
  /** Blocking connection shared by this process's BullMQ workers. */
  bullConnection: RedisClient;
  /**
   * The BullMQ queues' producer connection (jobs and webhooks): fails fast and pipelines like
   * `redis`. Apart from it because BullMQ defines its ~50 scripts on the connection it is given,
   * and ioredis copies every defined script into each pipeline it builds: on `redis` that was
   * every event-loop turn with any command (6-7% of the dispatcher's busy time); here, only
   * the turns that add a job or read queue counts. Auto-pipelined still, so a metrics scrape's
   * count of a thousand model queues stays one write.
   */
  queueConnection: RedisClient;
  keys: RedisKeys;
  /** The stores, with the run store observed: every status change, whoever makes it, passes its hooks. */
  stores: Stores;
  runs: ObservedRunStore;
  queues: JobQueues;
  /** QUEUE_PARTITIONS: the count this gateway queues under, and every count jobs were queued under (what dispatchers drain). */
  partitions: QueuePartitionCounts;
  /**
   * A submission's create and job add in one round trip, on `queueConnection`; absent when the
   * runs are in MongoDB or the queues on other primaries than the runs (a cluster). It creates through the Redis store itself, past `runs`: a create sets
   * no status, so there is nothing for the observed store's listeners.
   */
  intake?: CreateAndEnqueue;
  metrics: GatewayMetrics;
  gate: RequestGate;
  auth: ApiKeyAuthenticator;
  eventLog: RunEventLog;
  events: RunEventWriter;
  hub: RunEventHub;
  /** REDIS_WAIT_REPLICAS: waits for a run's accept and settle writes to reach the replicas; absent when 0. */
  replicas?: RunDurability;
}

/**
 * Connects Redis and opens the stores (the one step that needs I/O to build: a MongoDB store
 * connects), then builds the shared parts. Each is added to the lifecycle as it is made, so a
 * failure further on still closes what was opened.
 */
export async function openCore(config: Config, log: Logger, gatewayId: string, lifecycle: Lifecycle): Promise<Core> {
  const c = config;
  const redis = createRedis(c.redis, { name: 'api', autoPipelining: true });
  const subscriber = createRedis(c.redis, { name: `sub-${gatewayId}`, subscriber: true });
  const bullConnection = createRedis(c.redis, { name: 'dispatch', blocking: true });
  const queueConnection = createRedis(c.redis, { name: 'queues', autoPipelining: true });
  lifecycle.add('redis', { start: () => redis.ping(), stop: () => quit(redis) });
  lifecycle.add('redis subscriber', { stop: () => quit(subscriber) });
  lifecycle.add('redis for BullMQ workers', { stop: () => quit(bullConnection) });
  lifecycle.add('redis for BullMQ queues', { start: () => queueConnection.ping(), stop: () => quit(queueConnection) });
  await lifecycle.start();

  const base = await createStores({
    redis,
    redisPrefix: c.redisPrefix,
    mongoUrl: c.mongoUrl,
    mongoDb: c.mongoDb,
    retentionSeconds: c.runRetentionSeconds,
    fairShareStep: c.fairShareStep,
    eventLog: { maxLength: c.events.logMax, ttlMs: c.runRetentionSeconds * 1000 },
  });
  lifecycle.add('stores', { stop: () => base.close() });
  await lifecycle.start();

  const runs = new ObservedRunStore(base.runs);
  const stores: Stores = { ...pick(base), runs, ping: () => base.ping(), close: () => base.close() };
  // On a cluster the prefix is tagged, and each queue, instance and lease takes a slot of its own.
  const keys = new RedisKeys(c.redisPrefix);
  const partitions = new QueuePartitionCounts({ redis, key: keys.queuePartitionCounts(), own: c.queuePartitions });
  const queues = new JobQueues({ connection: queueConnection, prefixOf: keys.queuePrefixOf, modelQueuesKey: keys.modelQueues(), expiringKey: keys.runsExpiring(), partitions });
  // The intake sends the create and the add on one connection so Redis runs them in that order;
  // a queue on another primary than the run (spread queues) breaks that: the add then waits
  // for the create's answer, as with MongoDB.
  const intake = base.runs instanceof RedisRunStore && !keys.spread ? new CreateAndEnqueue({ store: base.runs, queues, log }) : undefined;
  const metrics = new GatewayMetrics();
  runs.onStatusChange(metrics.statusChanged);
  // The runs finished here keep the intake's guess of each account's fair-share step current.
  if (intake) runs.onStatusChange((run) => (isTerminal(run.status) ? intake.runFinished(run) : undefined));
  const gate = new RequestGate({ redis, keys, perSecond: c.rateLimitPerSecond, burst: c.rateLimitBurst });
  const eventLog = new RunEventLog({ redis, prefix: c.redisPrefix, maxLength: c.events.logMax, ttlMs: c.runRetentionSeconds * 1000 });
  const events = new RunEventWriter(eventLog, log);
  runs.setStatusLog(events);
  // Each batch's one log of its runs' status changes, whichever instance makes them (docs/jobs.md, "Batches").
  runs.onStatusChange(new BatchEventWriter(eventLog, log).statusChanged);
  const hub = new RunEventHub({ subscriber, log: eventLog, logger: log });
  const auth = new ApiKeyAuthenticator({ apiKeys: stores.apiKeys, gate, cacheTtlMs: c.keyCacheTtlMs });
  lifecycle.add('queues', { stop: () => queues.close() });
  const replicas = c.redisWaitReplicas > 0 ? new RunDurability(openReplicaWaiter(c, keys, metrics, log, lifecycle), runs, keys.replicaWaitProbeOf) : undefined;
  return { config, log, gatewayId, publicUrl: new PublicUrl(c.publicUrl), redis, subscriber, bullConnection, queueConnection, keys, stores, runs, queues, partitions, intake, metrics, gate, auth, eventLog, events, hub, replicas };
}

/** The waiter of REDIS_WAIT_REPLICAS, on a connection of its own (WAIT blocks the one it runs on). */
function openReplicaWaiter(c: Config, keys: RedisKeys, metrics: GatewayMetrics, log: Logger, lifecycle: Lifecycle): ReplicaWaiter {
  const redis = createRedis(c.redis, { name: 'replica-wait' });
  lifecycle.add('redis for replica waits', { stop: () => quit(redis) });
  return new ReplicaWaiter({
    redis,
    replicas: c.redisWaitReplicas,
    timeoutMs: c.redisWaitTimeoutMs,
    probeKey: keys.replicaWaitProbe(),
    ...(keys.spread ? { queueProbeKey: keys.queueReplicaWaitProbe } : {}),
    observe: (step, seconds, enough) => metrics.replicaWait(step, seconds, enough),
    shortfall: (acked, wanted, err) => log.warn({ err, acked, wanted }, 'writes answered before enough replicas had them (REDIS_WAIT_REPLICAS)'),
  });
}

/** The stores other than runs, passed through as they are. */
function pick(s: Stores): Omit<Stores, 'runs' | 'ping' | 'close'> {
  const { accounts, apiKeys, operators, workerTokens, idempotency, bots, conversations, tools, files, models } = s;
  return { accounts, apiKeys, operators, workerTokens, idempotency, bots, conversations, tools, files, models };
}

function quit(client: RedisClient): Promise<unknown> {
  return client.quit().catch(() => client.disconnect());
}
