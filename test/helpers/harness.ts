import { randomBytes } from 'node:crypto';
import { loadConfig, type Config } from '../../api/main/config.js';
import { Gateway } from '../../api/composition/gateway.js';
import { newRunId } from '../../models/ids.js';
import type { NewRun } from '../../models/types.js';
import type { Tier } from '../../models/kinds.js';
import type { Job, Queue } from 'bullmq';
import type { QueuedJobData } from '../../queues/job-queues.js';
import { partitionNames, queueName } from '../../queues/queue-names.js';
import { createRedis, primariesOf, type RedisClient } from '../../models/redis-connection.js';
import { redisTarget, type RedisTarget } from '../../models/redis-target.js';

export const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
/**
 * A Redis Cluster the test files run against instead of REDIS_URL's server, when the process is
 * given one (`npm run test:cluster` starts one and sets it; test/cluster/run.ts): their gateways,
 * gateway processes and clients then all use the cluster.
 */
export const REDIS_CLUSTER_NODES = process.env.REDIS_CLUSTER_NODES || undefined;
export const ON_CLUSTER = REDIS_CLUSTER_NODES !== undefined;
/** The Redis the tests' own clients and gateways connect to. */
export const TEST_REDIS: RedisTarget = redisTarget(REDIS_URL, REDIS_CLUSTER_NODES);

/** A client of the tests' Redis (one server, or the cluster), for tests that look into it. */
export function testRedis(name = 'test', target: RedisTarget = TEST_REDIS): RedisClient {
  return createRedis(target, { name });
}
export const ADMIN_TOKEN = 'test-admin-token-0123456789';
/**
 * One tool secret key for every test gateway, as every instance on one store must share one in
 * production: without it, two gateways of a test on one prefix but different DATA_DIRs would each
 * make a key file and the second would (rightly) refuse to start. Tests of the key file pass
 * `TOOL_SECRET_KEY: ''` (an empty setting is unset).
 */
export const TEST_TOOL_SECRET_KEY = Buffer.alloc(32, 7).toString('base64');

/**
 * A key prefix no other test file uses; everything under it is deleted by `cleanupPrefix`. On a
 * cluster it is hash-tagged as the gateway would make it (api/main/config-schema.ts), so the
 * prefix the test knows is the one the keys have.
 */
export function uniquePrefix(name: string, cluster = ON_CLUSTER): string {
  const prefix = `sytest-${name}-${randomBytes(4).toString('hex')}`;
  return cluster ? `{${prefix}}` : prefix;
}

/**
 * The object storage every test gateway uses when the run gives one: `npm test`'s cluster pass
 * (test/cluster/run.ts) starts an S3 stand-in and sets SY_TEST_S3_ENDPOINT and SY_TEST_S3_BUCKET
 * (with AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY), so its gateways keep artifacts and files
 * in the bucket, each under a key prefix of its own, instead of under DATA_DIR. Unset: `{}`
 * (the filesystem store). A test that looks at the filesystem store's files sets STORAGE=fs.
 */
export function testStorageEnv(prefix: string): Record<string, string> {
  const endpoint = process.env.SY_TEST_S3_ENDPOINT;
  if (!endpoint) return {};
  return {
    STORAGE: 's3',
    S3_BUCKET: process.env.SY_TEST_S3_BUCKET ?? 'switchyard-test',
    S3_ENDPOINT: endpoint,
    S3_REGION: 'us-east-1',
    S3_FORCE_PATH_STYLE: 'true',
    S3_PREFIX: prefix.replace(/[^A-Za-z0-9_.-]/g, '') || 'test',
  };
}

export function testConfig(prefix: string, env: Record<string, string> = {}): Config {
  return loadConfig({
    ...testStorageEnv(prefix),
    PORT: '0',
    HOST: '127.0.0.1',
    REDIS_URL,
    ...(REDIS_CLUSTER_NODES && { REDIS_CLUSTER_NODES }),
    REDIS_PREFIX: prefix,
    ADMIN_TOKEN,
    LOG_LEVEL: 'silent',
    RATE_LIMIT_PER_SEC: '0',
    // Tests that exercise the shutdown drain set it; elsewhere a stop should not wait on leases.
    SHUTDOWN_DRAIN_MS: '0',
    TOOL_SECRET_KEY: TEST_TOOL_SECRET_KEY,
    ...env,
  });
}

/**
 * Deletes every key under `prefix` (never FLUSHALL: other suites share this Redis), on every
 * primary of a cluster. A tagged prefix (`{p}`) takes the untagged one's keys too (`p:*`): a
 * cluster's spread queues are there (`p:q:{queue}:...`, models/redis/keys.ts).
 */
export async function cleanupPrefix(prefix: string, target: RedisTarget = TEST_REDIS): Promise<void> {
  const redis = testRedis('test-cleanup', target);
  const untagged = prefix.replace(/[{}]/g, '');
  const patterns = [prefix, ...(untagged !== prefix ? [untagged] : [])].map((p) => `${p.replace(/[?*[\]\\]/g, '\\$&')}:*`);
  try {
    for (const node of await primariesOf(redis)) {
      for (const pattern of patterns) {
        let cursor = '0';
        do {
          const [next, keys] = await node.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
          cursor = next;
          // One UNLINK per key: on a cluster a prefix without a hash tag spreads over slots.
          if (keys.length) await Promise.all(keys.map((key) => node.unlink(key)));
        } while (cursor !== '0');
      }
    }
  } finally {
    redis.disconnect();
  }
}

export interface Res<T = any> {
  status: number;
  headers: Headers;
  body: T;
  text: string;
}

/** A running gateway plus a tiny JSON client for it. */
export class TestGateway {
  gateway!: Gateway;
  url!: string;

  constructor(readonly prefix: string, readonly env: Record<string, string> = {}) {}

  async start(): Promise<this> {
    this.gateway = new Gateway({ config: testConfig(this.prefix, this.env) });
    this.url = (await this.gateway.start()).url;
    return this;
  }

  async stop(): Promise<void> {
    await this.gateway?.stop();
  }

  // The gateway's parts that tests look into, named here once so tests do not depend on how
  // the gateway holds them.
  get config() {
    return this.gateway.config;
  }
  get log() {
    return this.gateway.log;
  }
  get gatewayId() {
    return this.gateway.gatewayId;
  }
  get services() {
    return this.gateway.services;
  }
  get stores() {
    return this.gateway.stores;
  }
  get redis() {
    return this.gateway.redis;
  }
  get queues() {
    return this.gateway.queues;
  }
  get dispatcher() {
    return this.gateway.dispatcher;
  }
  /**
   * Every queue a kind's jobs of a tier (and model) may be in: its partitions under each count in
   * use (QUEUE_PARTITIONS) and the unsplit queue.
   */
  kindQueues(kind: string, tier: Tier = 'open', model?: string): Queue<QueuedJobData>[] {
    return partitionNames(queueName(kind, tier, model), this.gateway.core.partitions.all).map((name) => this.queues.named(name));
  }
  /** A run's BullMQ job, in whichever of its kind's queues (`kindQueues`) it is. */
  async queuedJob(runId: string, kind: string, tier: Tier = 'open', model?: string): Promise<Job<QueuedJobData> | undefined> {
    for (const queue of this.kindQueues(kind, tier, model)) {
      const job = await queue.getJob(runId);
      if (job) return job;
    }
    return undefined;
  }
  get hub() {
    return this.gateway.hub;
  }
  get metrics() {
    return this.gateway.metrics;
  }

  async request<T = any>(method: string, path: string, opts: { body?: unknown; raw?: string | Buffer; key?: string; headers?: Record<string, string> } = {}): Promise<Res<T>> {
    const headers: Record<string, string> = { ...(opts.headers ?? {}) };
    if (opts.key) headers.authorization ??= `Bearer ${opts.key}`;
    let body: string | Buffer | undefined = opts.raw;
    if (opts.body !== undefined) {
      body = JSON.stringify(opts.body);
      headers['content-type'] ??= 'application/json';
    }
    const res = await fetch(this.url + path, { method, headers, body });
    const text = await res.text();
    let parsed: unknown = text;
    try {
      parsed = JSON.parse(text);
    } catch {
      // not JSON: callers look at `text`
    }
    return { status: res.status, headers: res.headers, body: parsed as T, text };
  }

  /** Creates an account through the admin API; returns its id and key. */
  async account(credits = 1000, name = 'test'): Promise<{ id: string; key: string }> {
    const res = await this.request('POST', '/v1/admin/accounts', { body: { name, credits }, headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
    if (res.status !== 201) throw new Error(`account creation failed: ${res.status} ${res.text}`);
    return { id: res.body.account.id, key: res.body.api_key };
  }

  /** Registers an operator of `trust` through the admin API; returns its first worker token. */
  async workerToken(trust: 'open' | 'trusted' = 'open', name = `op-${trust}`): Promise<string> {
    const res = await this.request('POST', '/v1/admin/operators', { body: { name, trust }, headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
    if (res.status !== 201) throw new Error(`operator creation failed: ${res.status} ${res.text}`);
    return res.body.worker_token;
  }

  /** Mints a worker token of the account (open tier) through POST /v1/account/worker-tokens. */
  async accountWorkerToken(key: string): Promise<string> {
    const res = await this.request('POST', '/v1/account/worker-tokens', { key });
    if (res.status !== 201) throw new Error(`worker token creation failed: ${res.status} ${res.text}`);
    return res.body.worker_token;
  }

  submit(key: string, body: unknown = { kind: 'inference:image:generate', input: { prompt: 'a cat' } }, headers: Record<string, string> = {}) {
    return this.request('POST', '/v1/jobs', { body, key, headers });
  }
}

/** Asserts the error envelope (docs/api.md) and returns its code. */
export function errorCode(res: Res): string {
  const e = res.body?.error;
  if (!e || typeof e.code !== 'string' || typeof e.message !== 'string') throw new Error(`not an error envelope: ${res.status} ${res.text}`);
  return e.code;
}

/** A run as a submission would create it (an image job for 4 credits), with overrides. */
export function newRunSpec(accountId: string, over: Partial<NewRun> = {}): NewRun {
  return {
    run_id: newRunId(over.account_id ?? accountId),
    account_id: accountId,
    kind: 'inference:image:generate',
    confidentiality: 'open',
    class: 'standard',
    priorityBase: 20,
    price: 4,
    input: { prompt: 'a cat', nested: { list: [1, 'two', null] } },
    webhook: null,
    idempotency_key: null,
    created_at: new Date().toISOString(),
    ...over,
  };
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Polls `fn` until it returns something truthy; fails after `timeoutMs` (a deadline, not a timing assertion). */
export async function until<T>(what: string, fn: () => Promise<T | undefined | null | false>, timeoutMs = 10_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(25);
  }
}
