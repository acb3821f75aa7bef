import ipaddr from 'ipaddr.js';
import { KIND_NAMES, findKind } from '../../models/kinds.js';
import { priceProblem, type KindPrice, type UnitRate } from '../../models/pricing.js';
import type { AttestationSettings } from '../../dispatch/attestation/attestation-service.js';
import { readDeadlines } from './deadline-settings.js';
import { HASH_TAG } from '../../models/redis/keys.js';
import { MAX_PARTITIONS } from '../../models/redis/queue-partitions.js';
import { CLUSTER_URL, parseRedisTarget, type RedisTarget } from '../../models/redis-target.js';

const clusterGiven = (env: EnvValues) => env.REDIS_CLUSTER_NODES !== undefined || CLUSTER_URL.test(String(env.REDIS_URL));

/**
 * Every setting of the gateway, once: its variable, JSON Schema, default, README text and how
 * it becomes its value in `Config`. The table's nesting is `Config`'s (api/main/config.ts derives
 * the type from it), the README's settings table is rendered from it (api/main/config-doc.ts), so a
 * setting cannot be read, typed and documented three different ways.
 */

/** The variables as ajv left them: coerced to their schema's type, defaults filled in, unset ones absent. */
export type EnvValues = Readonly<Record<string, unknown>>;

export interface ReadContext {
  env: EnvValues;
  /** The variables the environment set, before defaults. */
  given: ReadonlySet<string>;
  /** Problems are collected, not thrown, so one ConfigError can name all of them. */
  problem(message: string): void;
}

export interface Setting<T> {
  /** Absent for a value derived from other settings; such a value has no README row. */
  readonly env?: string;
  /** The variable's JSON Schema; ajv coerces the text to its `type`. */
  readonly schema?: Readonly<Record<string, unknown>>;
  /** In the variable's own notation ('512mb', '443'): it is what the README shows. */
  readonly default?: string | number | boolean;
  /** README's default cell where no value of the variable says it (PUBLIC_URL's follows HOST and PORT). */
  readonly docDefault?: string;
  /** README's meaning cell, markdown. */
  readonly doc: string;
  /** Runs only on a value its schema accepted (undefined: unset, no default); `any` because each reader declares what its schema yields. */
  readonly read: (value: any, ctx: ReadContext) => T;
}

export interface SettingsGroup {
  readonly [key: string]: Setting<unknown> | SettingsGroup;
}

export function isSetting(node: Setting<unknown> | SettingsGroup): node is Setting<unknown> {
  return typeof node.read === 'function';
}

type Limits = { minimum?: number; maximum?: number; exclusiveMinimum?: number };

const setting = <T>(s: Setting<T>): Setting<T> => s;
const integer = (env: string, limits: Limits, dflt: number, doc: string) =>
  setting({ env, schema: { type: 'integer', ...limits }, default: dflt, doc, read: (v: number) => v });
const number = (env: string, limits: Limits, dflt: number, doc: string) =>
  setting({ env, schema: { type: 'number', ...limits }, default: dflt, doc, read: (v: number) => v });
const text = (env: string, schema: { pattern?: string; minLength?: number }, dflt: string, doc: string) =>
  setting({ env, schema: { type: 'string', ...schema }, default: dflt, doc, read: (v: string) => v });
const optionalText = (env: string, schema: { pattern?: string; minLength?: number }, doc: string) =>
  setting({ env, schema: { type: 'string', ...schema }, doc, read: (v: string | undefined) => v });

const SIZE = /^(\d+)(b|kb|mb|gb)?$/;
/** A size such as `512mb`; `units` is the alternation the variable accepts. */
const bytes = (env: string, units: string, dflt: string, doc: string) =>
  setting({
    env, schema: { type: 'string', pattern: `^\\d+(${units})?$` }, default: dflt, doc,
    read: (v: string) => {
      const m = SIZE.exec(v)!;
      return Number(m[1]) * (m[2] === 'gb' ? 1024 ** 3 : m[2] === 'mb' ? 1024 * 1024 : m[2] === 'kb' ? 1024 : 1);
    },
  });

const items = (v: string | undefined) => (v ?? '').split(',').map((x) => x.trim()).filter(Boolean);
/** Comma-separated text; `check` returns the problem with one item, if any. */
const list = (env: string, doc: string, opts: { docDefault?: string; check?: (item: string) => string | undefined } = {}) =>
  setting({
    env, schema: { type: 'string' }, docDefault: opts.docDefault, doc,
    read: (v: string | undefined, ctx) => {
      const out = items(v);
      for (const item of out) {
        const problem = opts.check?.(item);
        if (problem) ctx.problem(problem);
      }
      return out;
    },
  });
const ports = (env: string, dflt: string | undefined, doc: string) =>
  setting({
    env, schema: { type: 'string', pattern: '^\\s*\\d{1,5}\\s*(,\\s*\\d{1,5}\\s*)*$' }, default: dflt, doc,
    read: (v: string | undefined, ctx) => {
      const out = items(v).map(Number);
      if (out.some((p) => p < 1 || p > 65535)) ctx.problem(`${env} must list ports 1-65535`);
      return out;
    },
  });

function readPrices(text: string | undefined, ctx: ReadContext): Record<string, KindPrice> {
  const prices: Record<string, KindPrice> = Object.fromEntries(KIND_NAMES.map((k) => [k, findKind(k)!.defaultPrice]));
  if (text === undefined) return prices;
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    ctx.problem('PRICES must be a JSON object such as {"inference:image:generate": 4}');
    return prices;
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    ctx.problem('PRICES must be a JSON object of kind -> credits (or a per-unit price object)');
    return prices;
  }
  for (const [kind, price] of Object.entries(parsed)) {
    const problem = priceProblem(price);
    if (!findKind(kind)) ctx.problem(`PRICES names an unknown kind ${JSON.stringify(kind)}`);
    else if (problem) ctx.problem(`PRICES[${kind}] ${problem}`);
    else prices[kind] = typeof price === 'number' ? price : ({ ...(price as UnitRate), base: (price as UnitRate).base ?? 0 } as UnitRate);
  }
  return prices;
}

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];
const days = { type: 'number', exclusiveMinimum: 0, maximum: 3650 };

// README's table lists the settings in this order.
export const settings = {
  port: integer('PORT', { minimum: 0, maximum: 65535 }, 8080, 'HTTP port (`0` picks a free one)'),
  host: text('HOST', { minLength: 1 }, '127.0.0.1', 'interface to listen on (`0.0.0.0` in containers)'),
  publicUrl: setting({
    env: 'PUBLIC_URL', schema: { type: 'string', pattern: '^https?://[^/]+(/.*)?$' }, docDefault: '`http://HOST:PORT`',
    doc: 'base URL callers use, for absolute links',
    // A wildcard listen address is no address to give callers; loopback at least works locally.
    read: (v: string | undefined, { env }) =>
      (v ?? `http://${env.HOST === '0.0.0.0' || env.HOST === '::' ? '127.0.0.1' : env.HOST}:${env.PORT}`).replace(/\/+$/, ''),
  }),
  redisUrl: text('REDIS_URL', { pattern: '^rediss?(\\+cluster)?://' }, 'redis://127.0.0.1:6379', 'Redis for the queues (and the stores, without MongoDB); `redis+cluster://host:port,host:port` (TLS: `rediss+cluster://`) is a Redis Cluster'),
  redisClusterNodes: optionalText('REDIS_CLUSTER_NODES', { minLength: 1 }, 'a Redis Cluster instead of one server: some of its nodes, `host:port,host:port` (the client learns the rest); user, password and TLS come from REDIS_URL (docs/deploy.md, "Redis Cluster")'),
  /** Where Redis is, parsed once from REDIS_URL and REDIS_CLUSTER_NODES: what every connection is made to. */
  redis: setting({
    doc: 'the parsed Redis target',
    read: (_v: undefined, ctx): RedisTarget => {
      const target = parseRedisTarget(String(ctx.env.REDIS_URL), ctx.env.REDIS_CLUSTER_NODES as string | undefined);
      if (typeof target !== 'string') return target;
      ctx.problem(target);
      return { kind: 'single', url: String(ctx.env.REDIS_URL) };
    },
  }),
  // The dev launcher starts a local redis-server only when no Redis was asked for.
  redisUrlDefaulted: setting({ doc: 'true when REDIS_URL is unset', read: (_v: undefined, { given }) => !given.has('REDIS_URL') && !given.has('REDIS_CLUSTER_NODES') }),
  redisPrefix: setting({
    env: 'REDIS_PREFIX', schema: { type: 'string', pattern: '^[A-Za-z0-9_.{}-]+(:[A-Za-z0-9_.{}-]+)*$' }, default: 'sy',
    doc: "prefix of every Redis key Switchyard writes, BullMQ's included; on a Redis Cluster a prefix without a `{hash tag}` is made one (`sy` is `{sy}`), which keeps every key in one slot, except those of each account group (with its runs and API key limiters), BullMQ queue, gateway instance, lease and bot limiter, each under a tag of its own (docs/architecture.md, \"Redis Cluster\")",
    // Every multi-key script, MULTI and pipeline of the stores works on a cluster because their
    // keys share the prefix's slot (the queues take tags of their own: RedisKeys.queuePrefixOf).
    // A prefix that already has a tag is the operator's choice.
    read: (v: string, { env }) => (clusterGiven(env) && !HASH_TAG.test(v) ? `{${v}}` : v),
  }),
  queuePartitions: setting({
    env: 'QUEUE_PARTITIONS', schema: { type: 'integer', minimum: 1, maximum: MAX_PARTITIONS }, default: 1,
    doc: 'partitions each job queue is split in, a run in the one its id hashes to; dispatchers take the most urgent job of them all, as from one queue. On a Redis Cluster they are placed a partition-th of the slot space apart, so a busy kind spreads over that many primaries: set it to the number of primaries, or a multiple. Changing it is safe: every count ever used stays drained (docs/architecture.md, "Queue partitions")',
    read: (v: number) => v,
  }),
  redisWaitReplicas: integer('REDIS_WAIT_REPLICAS', { minimum: 0, maximum: 16 }, 0, "replicas that must hold a run's accept and settle writes (Redis `WAIT`) before the caller or worker is answered; 0 answers at once, and a primary lost right after can forget what it answered (docs/deploy.md, \"Durability across failover\")"),
  redisWaitTimeoutMs: integer('REDIS_WAIT_TIMEOUT_MS', { minimum: 1, maximum: 60_000 }, 1000, 'how long an answer waits for `REDIS_WAIT_REPLICAS`; past it, the answer goes out if the store still has the write (a shortfall, counted in `switchyard_redis_replica_shortfalls_total`), else it is a 503'),
  mongoUrl: optionalText('MONGO_URL', { pattern: '^mongodb(\\+srv)?://' }, 'keep accounts, keys, runs and idempotency records in MongoDB (a replica set: runs are created and settled in transactions)'),
  mongoDb: text('MONGO_DB', { pattern: '^[A-Za-z0-9_-]{1,63}$' }, 'switchyard', 'MongoDB database name'),
  adminToken: optionalText('ADMIN_TOKEN', { minLength: 16 }, 'bearer token of the operator API (`/v1/admin/...`) and of Bull Board (`/admin/queues`), at least 16 characters; both are off without it (`npm run dev` makes a dev one and prints it)'),
  dataDir: text('DATA_DIR', { minLength: 1 }, './.data', 'local data (the dev Redis, the dev API key) and, with `STORAGE=fs`, the artifacts (`DATA_DIR/artifacts`; share it between gateway instances)'),
  storage: setting({
    env: 'STORAGE', schema: { enum: ['fs', 's3'] }, default: 'fs', read: (v: 'fs' | 's3') => v,
    doc: 'where artifacts and uploaded files are kept: `fs`, files under `DATA_DIR/artifacts`; `s3`, an S3-compatible bucket (`S3_*`, credentials from the standard AWS variables: docs/deploy.md, "Object storage")',
  }),
  s3: {
    bucket: setting({
      env: 'S3_BUCKET', schema: { type: 'string', pattern: '^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$' }, doc: 'the bucket of `STORAGE=s3`; required with it',
      read: (v: string | undefined, ctx) => {
        if (ctx.env.STORAGE === 's3' && !v) ctx.problem('STORAGE=s3 needs S3_BUCKET');
        return v ?? '';
      },
    }),
    endpoint: optionalText('S3_ENDPOINT', { pattern: '^https?://[^/]+/?$' }, "an S3-compatible server's URL (MinIO, R2: `https://ACCOUNT.r2.cloudflarestorage.com`); unset, AWS's endpoint of `S3_REGION`"),
    region: text('S3_REGION', { pattern: '^[a-z0-9-]{1,40}$' }, 'us-east-1', 'the bucket\'s region (`auto` for R2)'),
    forcePathStyle: setting({
      env: 'S3_FORCE_PATH_STYLE', schema: { type: 'boolean' }, default: false, read: (v: boolean) => v,
      doc: 'address the bucket as `ENDPOINT/BUCKET/key` rather than `BUCKET.ENDPOINT/key` (MinIO and most self-hosted servers want `true`)',
    }),
    presignedRedirect: setting({
      env: 'S3_PRESIGNED_REDIRECT', schema: { type: 'boolean' }, default: false, read: (v: boolean) => v,
      doc: 'answer an artifact download (GET) with 307 to a presigned URL of the bucket instead of streaming it through the gateway: less gateway bandwidth, but the bytes come from the bucket\'s origin with its ETag and CORS (docs/deploy.md, "Object storage")',
    }),
    prefix: setting({
      env: 'S3_PREFIX', schema: { type: 'string', pattern: "^[A-Za-z0-9!_.*'()/-]+$" },
      doc: 'prefix of every key the gateway writes in the bucket (a `/` is added), so deployments can share one; the gateways that serve the same artifacts share it',
      read: (v: string | undefined) => (v === undefined ? '' : v.endsWith('/') ? v : `${v}/`),
    }),
  },
  artifactMaxBytes: bytes('ARTIFACT_MAX_BYTES', 'b|kb|mb|gb', '512mb', 'largest artifact a worker may upload (`b`, `kb`, `mb`, `gb`); larger ones get 413'),
  artifactRetentionSeconds: setting({
    env: 'ARTIFACT_RETENTION_DAYS', schema: days, default: 30, doc: 'how long an artifact URL serves its file; expired files are swept every 10 minutes',
    // A fraction of a day that rounds to 0 s would make every artifact expire on upload.
    read: (d: number) => Math.max(1, Math.round(d * 86400)),
  }),
  fileMaxBytes: bytes('FILE_MAX_BYTES', 'b|kb|mb|gb', '100mb', 'largest file an account may upload to `/v1/files` (`b`, `kb`, `mb`, `gb`); larger ones get 413'),
  fileFetchTimeoutMs: integer('FILE_FETCH_TIMEOUT_MS', { minimum: 1000, maximum: 3_600_000 }, 300000, 'how long fetching the file of an https URL in a job input may take, to its last byte (the answer must still start, and the body never pause, for longer than `OUTBOUND_TOTAL_TIMEOUT_MS`)'),
  fileQuotaBytes: bytes('FILE_QUOTA_BYTES', 'b|kb|mb|gb', '1gb', 'bytes of files an account may keep at once; an upload past it gets 409 `quota_exceeded`'),
  fileRetentionSeconds: setting({
    env: 'FILE_RETENTION_DAYS', schema: days, default: 7, doc: 'how long an uploaded file is kept; expired files are deleted and stop counting against the quota',
    read: (d: number) => Math.max(1, Math.round(d * 86400)),
  }),
  prices: setting({
    env: 'PRICES', schema: { type: 'string' }, docDefault: 'catalogue prices', read: readPrices,
    doc: 'JSON object of prices per kind; unnamed kinds keep their default. A number is a fixed price in credits, e.g. `{"inference:image:generate": 4}`; an object is a per-unit price in whole credits: `base`, and `per_1k_input_tokens`, `per_1k_output_tokens`, `per_second` (of output, per started second), `per_image`, with `max_input_tokens`, `max_output_tokens`, `max_seconds`, `max_images` (the most units charged, and reserved when a job\'s input gives no bound) and `max` (the most a job costs); every rated unit needs its `max_<unit>` or `max`, e.g. `{"inference:video:generate": {"base": 2, "per_second": 3, "max_seconds": 120}}` (docs/jobs.md, "Cost")',
  }),
  deadlines: setting({
    env: 'JOB_DEADLINES', schema: { type: 'string' }, docDefault: 'a day to start, an hour per attempt',
    read: readDeadlines,
    doc: 'JSON object of deadlines per kind (or `"*"` for every kind) in seconds: `ttl_s` (how long a job may wait to start) and `timeout_s` (how long an attempt may run) when a job does not say, 0 for none, and the most a job may ask, `max_ttl_s` and `max_timeout_s`; built in: `{"*": {"ttl_s": 86400, "max_ttl_s": 604800, "timeout_s": 3600, "max_timeout_s": 86400}}` (docs/jobs.md, "Deadlines")',
  }),
  runRetentionSeconds: setting({ env: 'RUN_RETENTION_DAYS', schema: days, default: 30, doc: 'how long finished runs are kept', read: (d: number) => Math.round(d * 86400) }),
  jobMaxAttempts: integer('JOB_MAX_ATTEMPTS', { minimum: 1, maximum: 100 }, 3, 'leases a run may use before it fails for good, unless its job sets `max_attempts` (docs/jobs.md, "Attempts")'),
  jobMaxAttemptsLimit: integer('JOB_MAX_ATTEMPTS_LIMIT', { minimum: 1, maximum: 100 }, 10, 'the most `max_attempts` a job may ask; more is refused (400)'),
  retryBackoffMs: integer('RETRY_BACKOFF_MS', { minimum: 0, maximum: 3_600_000 }, 1000, "after a worker's retryable failure, how long that worker leaves the job's queue to other workers, or, when no other worker could take the job, how long the retry waits; doubles with each attempt (docs/architecture.md, \"Retries\")"),
  retryBackoffMaxMs: integer('RETRY_BACKOFF_MAX_MS', { minimum: 0, maximum: 3_600_000 }, 30000, 'the longest `RETRY_BACKOFF_MS` grows to'),
  jsonBodyLimitBytes: bytes('JSON_BODY_LIMIT', 'b|kb|mb', '3mb', 'largest JSON body (`b`, `kb`, `mb`); larger ones get 413. Large enough for a job input holding a `data:` URI of `DATA_URI_MAX_BYTES` (base64 adds a third)'),
  dataUriMaxBytes: bytes('DATA_URI_MAX_BYTES', 'b|kb|mb', '2mb', 'largest file a job input may carry inline as a `data:` URI (decoded); larger files go through `/v1/files` or an https URL'),
  jsonMaxDepth: integer('JSON_MAX_DEPTH', { minimum: 2, maximum: 1000 }, 64, 'deepest nesting accepted in a JSON body'),
  rateLimitPerSecond: number('RATE_LIMIT_PER_SEC', { minimum: 0 }, 50, 'sustained requests per second per API key, shared by all instances (`0` = off)'),
  rateLimitBurst: integer('RATE_LIMIT_BURST', { minimum: 1 }, 100, 'requests a key may make at once'),
  fairShareStep: integer('FAIR_SHARE_STEP', { minimum: 1, maximum: 1000 }, 1, 'jobs an account of weight 1 gets per round when accounts of one class share the workers of a kind (an account of weight w gets w times as many; docs/jobs.md, "Limits and fairness")'),
  accountMaxRunning: integer('ACCOUNT_MAX_RUNNING', { minimum: 0 }, 0, 'runs an account may have running at once unless the admin API sets its own `max_running` (`0` = no limit; docs/jobs.md, "Limits and fairness")'),
  keyMaxRunning: integer('KEY_MAX_RUNNING', { minimum: 0 }, 0, 'runs an API key may have running at once unless its own `max_running` is set (`0` = no limit)'),
  leaseTtlMs: integer('LEASE_TTL_MS', { minimum: 1000, maximum: 3_600_000 }, 30000, "a lease not extended by its worker's heartbeats for this long is lost (its job goes back to the queue)"),
  heartbeatMs: integer('HEARTBEAT_MS', { minimum: 100, maximum: 60_000 }, 5000, 'how often workers send heartbeats; three missed close the socket'),
  rankBufferBytes: integer('RANK_BUFFER_BYTES', { minimum: 65_536, maximum: 1_073_741_824 }, 4_194_304, "bytes of a pipeline's activation frames the gateway holds for one receiving rank before it stops reading its senders (back-pressure: docs/ranks.md)"),
  shutdownDrainMs: integer('SHUTDOWN_DRAIN_MS', { minimum: 0, maximum: 600_000 }, 10000, `at shutdown, how long workers of protocol 1 may take to finish their leases before those are requeued (workers of protocol 2, the SDK's, move their running leases to another instance instead: docs/operations.md, "Graceful shutdown")`),
  shutdownDelayMs: integer('SHUTDOWN_DELAY_MS', { minimum: 0, maximum: 60_000 }, 0, "at shutdown, how long `/readyz` answers 503 before the gateway stops listening (set it to your load balancer's probe interval if that is how it learns an instance is leaving)"),
  console: {
    enabled: setting({ env: 'CONSOLE', schema: { type: 'boolean' }, default: true, doc: 'serve the web console at `/` (docs/console.md); `false` answers its pages 404', read: (v: boolean) => v }),
    signInTtlSeconds: integer('CONSOLE_SIGN_IN_TTL_S', { minimum: 60, maximum: 7 * 86400 }, 86400, 'how long a one-time console sign-in link stays good (`npm run dev` prints one; `POST /v1/admin/accounts/{id}/sign-in-links` makes them)'),
  },
  demoDelayMs: integer('DEMO_DELAY_MS', { minimum: 0 }, 1000, '`npm run dev` only: how long the demo fleet takes per job'),
  enqueueReconcileAfterMs: integer('ENQUEUE_RECONCILE_AFTER_MS', { minimum: 100 }, 5000, 'age after which an accepted run missing from its queue is enqueued by the reconciler'),
  events: {
    logMax: integer('EVENT_LOG_MAX', { minimum: 100, maximum: 1_000_000 }, 10000, 'events kept per run for replay (oldest trimmed first); the log lives as long as the run record'),
    pingMs: integer('SSE_PING_MS', { minimum: 100, maximum: 15000 }, 15000, 'interval of the `: ping` comment on SSE streams (at most 15000)'),
    clientBufferBytes: bytes('EVENT_CLIENT_BUFFER', 'b|kb|mb', '1mb', 'unsent bytes a live SSE or WebSocket client may hold before it is cut off (it resumes with `Last-Event-ID` / `after`)'),
  },
  // Checked against the attestation service's own settings type, so the two cannot part.
  attestation: {
    jwks: optionalText('ATTESTATION_JWKS', { minLength: 1 }, "the attestation verifier's keys for private workers: a JWKS file or https URL (NVIDIA's in production; `npm run dev` makes a local one); unset, private workers are refused (docs/confidentiality.md)"),
    issuer: text('ATTESTATION_ISSUER', { minLength: 1 }, 'https://nras.attestation.nvidia.com', 'the `iss` every evidence token must carry'),
    driverVersions: list('ATTESTATION_DRIVER_VERSIONS', 'comma-separated allow-list of GPU driver versions', { docDefault: 'unset (any)' }),
    vbiosVersions: list('ATTESTATION_VBIOS_VERSIONS', 'comma-separated allow-list of GPU VBIOS versions', { docDefault: 'unset (any)' }),
    nonceTtlMs: integer('ATTESTATION_NONCE_TTL_MS', { minimum: 1000, maximum: 3_600_000 }, 120000, "how long a worker has to answer the gateway's attestation nonce"),
    refreshBeforeMs: integer('ATTESTATION_REFRESH_BEFORE_MS', { minimum: 1000, maximum: 86_400_000 }, 300000, 'fresh evidence is asked for this long before the current one expires'),
  } satisfies { [K in keyof AttestationSettings]-?: Setting<AttestationSettings[K]> },
  agents: {
    toolSecretKey: setting({
      env: 'TOOL_SECRET_KEY', schema: { type: 'string', pattern: '^([A-Za-z0-9+/]{43}=|[0-9a-fA-F]{64})$' },
      doc: "32 bytes (base64 or hex) that encrypt tools' secrets at rest (AES-256-GCM); unset, the gateway makes one once and keeps it in `DATA_DIR/tool-secret.key` (mode 0600), with a warning that instances sharing a store must share the key; a key that cannot open the stored secrets stops the start",
      read: (v: string | undefined): Buffer | undefined => (v ? Buffer.from(v, v.length === 64 ? 'hex' : 'base64') : undefined),
    }),
    maxSteps: integer('AGENT_MAX_STEPS', { minimum: 1, maximum: 50 }, 8, 'LLM steps per bot turn before it stops with `max_steps`'),
    llmStepTimeoutMs: integer('LLM_STEP_TIMEOUT_MS', { minimum: 1000, maximum: 600_000 }, 120000, 'how long one LLM step (an llm job) may take'),
    botRatePerMinute: integer('BOT_RATE_PER_MIN', { minimum: 1, maximum: 1_000_000 }, 120, 'messages per minute one bot accepts'),
    botClientRatePerMinute: integer('BOT_CLIENT_RATE_PER_MIN', { minimum: 1, maximum: 1_000_000 }, 20, 'messages per minute one bot accepts from one client address'),
    botSessionTtlSeconds: integer('BOT_SESSION_TTL_S', { minimum: 30, maximum: 86400 }, 900, 'lifetime of secure-mode bot session tokens'),
  },
  webhooks: {
    retryDelaysMs: setting({
      env: 'WEBHOOK_RETRY_DELAYS_MS', schema: { type: 'string', pattern: '^\\s*(\\d+\\s*(,\\s*\\d+\\s*)*)?$' }, default: '5000,300000,1800000,7200000,18000000,36000000',
      doc: "delays (ms) before each webhook retry, one retry per entry; the default's last try is ~17.6 h after the first (docs/webhooks.md)",
      read: (v: string) => items(v).map(Number),
    }),
  },
  outbound: {
    allowedPorts: ports('OUTBOUND_ALLOWED_PORTS', '443', 'ports a webhook (or any account-supplied) URL may name, comma-separated'),
    allowCidrs: list('OUTBOUND_ALLOW_CIDRS', 'address ranges exempt from the SSRF guard, e.g. `10.20.0.0/16` for internal receivers', {
      check: (cidr) => {
        try {
          ipaddr.parseCIDR(cidr);
          return undefined;
        } catch {
          return `OUTBOUND_ALLOW_CIDRS: ${JSON.stringify(cidr)} is not an address range such as 10.0.0.0/8`;
        }
      },
    }),
    caFile: optionalText('OUTBOUND_CA_FILE', { minLength: 1 }, 'PEM file of extra certificate authorities trusted for outbound https, beside the system roots'),
    connectTimeoutMs: integer('OUTBOUND_CONNECT_TIMEOUT_MS', { minimum: 100, maximum: 120_000 }, 5000, 'outbound calls: DNS, TCP and TLS must finish within this'),
    totalTimeoutMs: integer('OUTBOUND_TOTAL_TIMEOUT_MS', { minimum: 100, maximum: 600_000 }, 15000, 'outbound calls: the whole call, to the last response byte; for the files of https URLs in job inputs, the wait for the answer and the longest pause in its body (the whole fetch: `FILE_FETCH_TIMEOUT_MS`)'),
    maxResponseBytes: bytes('OUTBOUND_MAX_RESPONSE', 'b|kb|mb', '1mb', 'outbound calls: a larger response body fails the call (`b`, `kb`, `mb`)'),
    devLocalPorts: ports('DEV_ALLOW_LOCAL_PORTS', undefined, '`npm run dev` only (`--allow-local`), UNSAFE in production: ports on which tool and webhook URLs may be plain http and reach loopback; `serve` refuses to start with it'),
  },
  keyCacheTtlMs: integer('KEY_CACHE_TTL_MS', { minimum: 0 }, 60000, 'how long a process caches an API key record (revocations still bite at once)'),
  trustProxy: setting({ env: 'TRUST_PROXY', schema: { type: 'boolean' }, default: false, doc: 'trust `X-Forwarded-*` from a reverse proxy', read: (v: boolean) => v }),
  metricsToken: optionalText('METRICS_TOKEN', { minLength: 16 }, 'bearer token `GET /metrics` requires; unset, `/metrics` is open (keep it on a private network)'),
  logLevel: setting({
    env: 'LOG_LEVEL', schema: { enum: LOG_LEVELS }, default: 'info', doc: `${LOG_LEVELS.map((l) => `\`${l}\``).join(' ')} (JSON logs on stdout)`,
    read: (v: string) => v,
  }),
};

type ValueOf<N> = N extends Setting<infer T> ? T : ConfigOf<N>;
/** Settings whose value may be undefined become optional properties, as a hand-written interface would have them. */
type OptionalKeys<G> = { [K in keyof G]: G[K] extends Setting<infer T> ? (undefined extends T ? K : never) : never }[keyof G];
type Flatten<T> = { [K in keyof T]: T[K] };
export type ConfigOf<G> = Flatten<{ [K in Exclude<keyof G, OptionalKeys<G>>]: ValueOf<G[K]> } & { [K in OptionalKeys<G>]?: Exclude<ValueOf<G[K]>, undefined> }>;
