import { Ajv } from 'ajv';
import ipaddr from 'ipaddr.js';
import { KIND_NAMES, findKind } from '../../models/kinds.js';
import type { AttestationSettings } from '../../dispatch/attestation/attestation-service.js';

/**
 * Gateway configuration, read from the environment once at boot and validated as a whole:
 * a bad value stops the process with one message that names every problem.
 */
export interface Config {
  /** @defaultValue 8080 */
  port: number;
  /** @defaultValue '127.0.0.1' */
  host: string;
  /** Absolute base URL callers use; built into Location headers and artifact URLs. @defaultValue http://HOST:PORT */
  publicUrl: string;
  /** @defaultValue 'redis://127.0.0.1:6379' */
  redisUrl: string;
  /** True when REDIS_URL was not set (the dev launcher may then start a local redis-server). */
  redisUrlDefaulted: boolean;
  /** Prefix of every Redis key Switchyard writes, BullMQ's included. @defaultValue 'sy' */
  redisPrefix: string;
  /** When set, the stores live in MongoDB instead of Redis. */
  mongoUrl?: string;
  /** @defaultValue 'switchyard' */
  mongoDb: string;
  /** Bearer token of the operator API; the admin API is disabled when unset. */
  adminToken?: string;
  /** @defaultValue './.data' */
  dataDir: string;
  /** Largest artifact a worker may upload. @defaultValue 512 MiB */
  artifactMaxBytes: number;
  /** How long an uploaded artifact is served before the sweeper deletes it. @defaultValue 30 days */
  artifactRetentionSeconds: number;
  /** Credits per job, by kind. @defaultValue each kind's catalogue price */
  prices: Record<string, number>;
  /** How long a finished run record is kept. @defaultValue 30 days */
  runRetentionSeconds: number;
  /** How many times a run is leased before it fails for good. @defaultValue 3 */
  jobMaxAttempts: number;
  /** A lease not extended by its worker's heartbeats for this long is lost. @defaultValue 30000 */
  leaseTtlMs: number;
  /** How often workers send heartbeats; three missed close the socket. @defaultValue 5000 */
  heartbeatMs: number;
  /** At shutdown, how long workers of protocol 1 may take to finish their leases before those are requeued. @defaultValue 10000 */
  shutdownDrainMs: number;
  /** At shutdown, how long /readyz answers 503 before the instance stops listening, so load balancers that probe it route elsewhere first. @defaultValue 0 */
  shutdownDelayMs: number;
  /** Largest JSON body accepted. @defaultValue 1 MiB */
  jsonBodyLimitBytes: number;
  /** Deepest nesting accepted in a JSON body. @defaultValue 64 */
  jsonMaxDepth: number;
  /** Requests per second per API key (0 turns limiting off). @defaultValue 50 */
  rateLimitPerSecond: number;
  /** Requests a key may make in one burst. @defaultValue 100 */
  rateLimitBurst: number;
  /** An account's in-flight runs per priority step within its class (fair sharing). @defaultValue 10 */
  fairShareStep: number;
  /** Age after which an accepted run missing from its queue is enqueued by the reconciler. @defaultValue 5000 */
  enqueueReconcileAfterMs: number;
  /** How long an API key lookup is cached per process (revocations evict at once). @defaultValue 60000 */
  keyCacheTtlMs: number;
  /** Honour X-Forwarded-For for client addresses. @defaultValue false */
  trustProxy: boolean;
  /** @defaultValue 'info' */
  logLevel: string;
  /** Bearer token required by GET /metrics; unset: /metrics is open (scrape it on a private network). */
  metricsToken?: string;
  /** Live events (SSE, caller WebSocket). */
  events: {
    /** Events kept per run (oldest trimmed first). @defaultValue 10000 */
    logMax: number;
    /** Interval of the `: ping` comment on idle SSE streams. @defaultValue 15000 */
    pingMs: number;
    /** Unsent bytes a slow SSE or WebSocket client may hold before it is cut off (it resumes with Last-Event-ID). @defaultValue 1 MiB */
    clientBufferBytes: number;
  };
  /** Webhook delivery. */
  webhooks: {
    /** Delays before each retry; the number of entries is the number of retries. @defaultValue 5 s, 5 min, 30 min, 2 h, 5 h, 10 h (last try ~17.6 h after the first) */
    retryDelaysMs: number[];
  };
  /** Private tier: how attestation evidence is checked (docs/confidentiality.md). */
  attestation: AttestationSettings;
  /** Tools, bots and the agent loop. */
  agents: {
    /** AES-256-GCM key that encrypts tool secrets at rest (TOOL_SECRET_KEY, 32 bytes as base64 or hex). Unset: the gateway makes one under DATA_DIR (api/services/tools/tool-secret-key.ts). */
    toolSecretKey?: Buffer;
    /** LLM steps per agent turn before it stops with `max_steps`. @defaultValue 8 */
    maxSteps: number;
    /** One LLM step may take this long. @defaultValue 120000 */
    llmStepTimeoutMs: number;
    /** Messages per minute a bot accepts in all. @defaultValue 120 */
    botRatePerMinute: number;
    /** Messages per minute a bot accepts from one client address. @defaultValue 20 */
    botClientRatePerMinute: number;
    /** Lifetime of secure-mode session tokens. @defaultValue 900 */
    botSessionTtlSeconds: number;
  };
  /** Outbound HTTP to account-supplied URLs (webhooks, tools, bots), all behind the SSRF guard. */
  outbound: {
    /** Ports an outbound URL may name. @defaultValue [443] */
    allowedPorts: number[];
    /** Address ranges exempt from the guard's block list (an operator's internal receivers, tests). @defaultValue [] */
    allowCidrs: string[];
    /** PEM file of extra certificate authorities trusted for outbound https, beside the system roots. */
    caFile?: string;
    /** @defaultValue 5000 */
    connectTimeoutMs: number;
    /** Whole request, connect to last response byte. @defaultValue 15000 */
    totalTimeoutMs: number;
    /** Larger response bodies are cut off (and the call counts as failed). @defaultValue 1 MiB */
    maxResponseBytes: number;
    /**
     * DEV_ALLOW_LOCAL_PORTS: ports on which outbound URLs may be plain http and reach loopback,
     * for receivers on the developer's own machine. Unsafe in production: `serve` refuses to
     * start with it, only `dev` (`--allow-local`) takes it. @defaultValue []
     */
    devLocalPorts: number[];
  };
}

export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`invalid configuration:\n  - ${problems.join('\n  - ')}`);
    this.name = 'ConfigError';
  }
}

const envSchema = {
  type: 'object',
  properties: {
    PORT: { type: 'integer', minimum: 0, maximum: 65535, default: 8080 },
    HOST: { type: 'string', minLength: 1, default: '127.0.0.1' },
    PUBLIC_URL: { type: 'string', pattern: '^https?://[^/]+(/.*)?$' },
    REDIS_URL: { type: 'string', pattern: '^rediss?://' },
    REDIS_PREFIX: { type: 'string', pattern: '^[A-Za-z0-9_.{}-]+(:[A-Za-z0-9_.{}-]+)*$', default: 'sy' },
    MONGO_URL: { type: 'string', pattern: '^mongodb(\\+srv)?://' },
    MONGO_DB: { type: 'string', pattern: '^[A-Za-z0-9_-]{1,63}$', default: 'switchyard' },
    ADMIN_TOKEN: { type: 'string', minLength: 16 },
    DATA_DIR: { type: 'string', minLength: 1, default: './.data' },
    ARTIFACT_MAX_BYTES: { type: 'string', pattern: '^\\d+(b|kb|mb|gb)?$', default: '512mb' },
    ARTIFACT_RETENTION_DAYS: { type: 'number', exclusiveMinimum: 0, maximum: 3650, default: 30 },
    PRICES: { type: 'string' },
    RUN_RETENTION_DAYS: { type: 'number', exclusiveMinimum: 0, maximum: 3650, default: 30 },
    JOB_MAX_ATTEMPTS: { type: 'integer', minimum: 1, maximum: 100, default: 3 },
    LEASE_TTL_MS: { type: 'integer', minimum: 1000, maximum: 3_600_000, default: 30000 },
    HEARTBEAT_MS: { type: 'integer', minimum: 100, maximum: 60_000, default: 5000 },
    SHUTDOWN_DRAIN_MS: { type: 'integer', minimum: 0, maximum: 600_000, default: 10000 },
    SHUTDOWN_DELAY_MS: { type: 'integer', minimum: 0, maximum: 60_000, default: 0 },
    JSON_BODY_LIMIT: { type: 'string', pattern: '^\\d+(b|kb|mb)?$', default: '1mb' },
    JSON_MAX_DEPTH: { type: 'integer', minimum: 2, maximum: 1000, default: 64 },
    RATE_LIMIT_PER_SEC: { type: 'number', minimum: 0, default: 50 },
    RATE_LIMIT_BURST: { type: 'integer', minimum: 1, default: 100 },
    FAIR_SHARE_STEP: { type: 'integer', minimum: 1, default: 10 },
    ENQUEUE_RECONCILE_AFTER_MS: { type: 'integer', minimum: 100, default: 5000 },
    KEY_CACHE_TTL_MS: { type: 'integer', minimum: 0, default: 60000 },
    TRUST_PROXY: { type: 'boolean', default: false },
    EVENT_LOG_MAX: { type: 'integer', minimum: 100, maximum: 1_000_000, default: 10000 },
    SSE_PING_MS: { type: 'integer', minimum: 100, maximum: 15000, default: 15000 },
    EVENT_CLIENT_BUFFER: { type: 'string', pattern: '^\\d+(b|kb|mb)?$', default: '1mb' },
    WEBHOOK_RETRY_DELAYS_MS: { type: 'string', pattern: '^\\s*(\\d+\\s*(,\\s*\\d+\\s*)*)?$', default: '5000,300000,1800000,7200000,18000000,36000000' },
    ATTESTATION_JWKS: { type: 'string', minLength: 1 },
    ATTESTATION_ISSUER: { type: 'string', minLength: 1, default: 'https://nras.attestation.nvidia.com' },
    ATTESTATION_DRIVER_VERSIONS: { type: 'string', default: '' },
    ATTESTATION_VBIOS_VERSIONS: { type: 'string', default: '' },
    ATTESTATION_NONCE_TTL_MS: { type: 'integer', minimum: 1000, maximum: 3_600_000, default: 120000 },
    ATTESTATION_REFRESH_BEFORE_MS: { type: 'integer', minimum: 1000, maximum: 86_400_000, default: 300000 },
    TOOL_SECRET_KEY: { type: 'string', pattern: '^([A-Za-z0-9+/]{43}=|[0-9a-fA-F]{64})$' },
    AGENT_MAX_STEPS: { type: 'integer', minimum: 1, maximum: 50, default: 8 },
    LLM_STEP_TIMEOUT_MS: { type: 'integer', minimum: 1000, maximum: 600_000, default: 120000 },
    BOT_RATE_PER_MIN: { type: 'integer', minimum: 1, maximum: 1_000_000, default: 120 },
    BOT_CLIENT_RATE_PER_MIN: { type: 'integer', minimum: 1, maximum: 1_000_000, default: 20 },
    BOT_SESSION_TTL_S: { type: 'integer', minimum: 30, maximum: 86400, default: 900 },
    OUTBOUND_ALLOWED_PORTS: { type: 'string', pattern: '^\\s*\\d{1,5}\\s*(,\\s*\\d{1,5}\\s*)*$', default: '443' },
    OUTBOUND_ALLOW_CIDRS: { type: 'string', default: '' },
    OUTBOUND_CA_FILE: { type: 'string', minLength: 1 },
    OUTBOUND_CONNECT_TIMEOUT_MS: { type: 'integer', minimum: 100, maximum: 120_000, default: 5000 },
    OUTBOUND_TOTAL_TIMEOUT_MS: { type: 'integer', minimum: 100, maximum: 600_000, default: 15000 },
    OUTBOUND_MAX_RESPONSE: { type: 'string', pattern: '^\\d+(b|kb|mb)?$', default: '1mb' },
    DEV_ALLOW_LOCAL_PORTS: { type: 'string', pattern: '^\\s*\\d{1,5}\\s*(,\\s*\\d{1,5}\\s*)*$' },
    METRICS_TOKEN: { type: 'string', minLength: 16 },
    LOG_LEVEL: { enum: ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'], default: 'info' },
  },
} as const;

const ajv = new Ajv({ coerceTypes: true, useDefaults: true, allErrors: true, strict: true });
const validateEnv = ajv.compile(envSchema);

function parseSize(text: string): number {
  const m = /^(\d+)(b|kb|mb|gb)?$/.exec(text)!;
  const unit = m[2] === 'gb' ? 1024 ** 3 : m[2] === 'mb' ? 1024 * 1024 : m[2] === 'kb' ? 1024 : 1;
  return Number(m[1]) * unit;
}

function parsePrices(text: string | undefined, problems: string[]): Record<string, number> {
  const prices: Record<string, number> = Object.fromEntries(KIND_NAMES.map((k) => [k, findKind(k)!.defaultPrice]));
  if (text === undefined || text === '') return prices;
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    problems.push('PRICES must be a JSON object such as {"inference:image:generate": 4}');
    return prices;
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    problems.push('PRICES must be a JSON object of kind -> credits');
    return prices;
  }
  for (const [kind, price] of Object.entries(parsed)) {
    if (!findKind(kind)) problems.push(`PRICES names an unknown kind ${JSON.stringify(kind)}`);
    else if (!Number.isSafeInteger(price) || (price as number) < 0) problems.push(`PRICES[${kind}] must be a whole number >= 0`);
    else prices[kind] = price as number;
  }
  return prices;
}

/** Reads the configuration from `env`; throws a `ConfigError` listing every problem found. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  // Empty strings count as unset, so `FOO= npm start` behaves like leaving FOO out.
  const raw: Record<string, unknown> = {};
  for (const key of Object.keys(envSchema.properties)) {
    const value = env[key];
    if (value !== undefined && value !== '') raw[key] = value;
  }
  const problems: string[] = [];
  if (!validateEnv(raw)) {
    for (const e of validateEnv.errors ?? []) {
      const name = e.instancePath.replace(/^\//, '') || 'environment';
      problems.push(`${name} ${e.message}${e.params && 'allowedValues' in e.params ? ` (${(e.params.allowedValues as string[]).join(', ')})` : ''}`);
    }
  }
  const prices = parsePrices(raw.PRICES as string | undefined, problems);
  const numbers = (text: unknown) => String(text ?? '').split(',').map((x) => x.trim()).filter(Boolean).map(Number);
  const allowedPorts = numbers(raw.OUTBOUND_ALLOWED_PORTS);
  if (allowedPorts.some((p) => p < 1 || p > 65535)) problems.push('OUTBOUND_ALLOWED_PORTS must list ports 1-65535');
  const devLocalPorts = numbers(raw.DEV_ALLOW_LOCAL_PORTS);
  if (devLocalPorts.some((p) => p < 1 || p > 65535)) problems.push('DEV_ALLOW_LOCAL_PORTS must list ports 1-65535');
  const list = (text: unknown) => String(text ?? '').split(',').map((x) => x.trim()).filter(Boolean);
  const allowCidrs = list(raw.OUTBOUND_ALLOW_CIDRS);
  for (const cidr of allowCidrs) {
    try {
      ipaddr.parseCIDR(cidr);
    } catch {
      problems.push(`OUTBOUND_ALLOW_CIDRS: ${JSON.stringify(cidr)} is not an address range such as 10.0.0.0/8`);
    }
  }
  if (problems.length) throw new ConfigError(problems);

  const port = raw.PORT as number;
  const host = raw.HOST as string;
  const publicHost = host === '0.0.0.0' || host === '::' ? '127.0.0.1' : host;
  return {
    port,
    host,
    publicUrl: ((raw.PUBLIC_URL as string | undefined) ?? `http://${publicHost}:${port}`).replace(/\/+$/, ''),
    redisUrl: (raw.REDIS_URL as string | undefined) ?? 'redis://127.0.0.1:6379',
    redisUrlDefaulted: raw.REDIS_URL === undefined,
    redisPrefix: raw.REDIS_PREFIX as string,
    mongoUrl: raw.MONGO_URL as string | undefined,
    mongoDb: raw.MONGO_DB as string,
    adminToken: raw.ADMIN_TOKEN as string | undefined,
    dataDir: raw.DATA_DIR as string,
    artifactMaxBytes: parseSize(raw.ARTIFACT_MAX_BYTES as string),
    artifactRetentionSeconds: Math.max(1, Math.round((raw.ARTIFACT_RETENTION_DAYS as number) * 86400)),
    prices,
    runRetentionSeconds: Math.round((raw.RUN_RETENTION_DAYS as number) * 86400),
    jobMaxAttempts: raw.JOB_MAX_ATTEMPTS as number,
    leaseTtlMs: raw.LEASE_TTL_MS as number,
    heartbeatMs: raw.HEARTBEAT_MS as number,
    shutdownDrainMs: raw.SHUTDOWN_DRAIN_MS as number,
    shutdownDelayMs: raw.SHUTDOWN_DELAY_MS as number,
    jsonBodyLimitBytes: parseSize(raw.JSON_BODY_LIMIT as string),
    jsonMaxDepth: raw.JSON_MAX_DEPTH as number,
    rateLimitPerSecond: raw.RATE_LIMIT_PER_SEC as number,
    rateLimitBurst: raw.RATE_LIMIT_BURST as number,
    fairShareStep: raw.FAIR_SHARE_STEP as number,
    enqueueReconcileAfterMs: raw.ENQUEUE_RECONCILE_AFTER_MS as number,
    keyCacheTtlMs: raw.KEY_CACHE_TTL_MS as number,
    trustProxy: raw.TRUST_PROXY as boolean,
    logLevel: raw.LOG_LEVEL as string,
    metricsToken: raw.METRICS_TOKEN as string | undefined,
    events: {
      logMax: raw.EVENT_LOG_MAX as number,
      pingMs: raw.SSE_PING_MS as number,
      clientBufferBytes: parseSize(raw.EVENT_CLIENT_BUFFER as string),
    },
    webhooks: { retryDelaysMs: numbers(raw.WEBHOOK_RETRY_DELAYS_MS) },
    attestation: {
      jwks: raw.ATTESTATION_JWKS as string | undefined,
      issuer: raw.ATTESTATION_ISSUER as string,
      driverVersions: list(raw.ATTESTATION_DRIVER_VERSIONS),
      vbiosVersions: list(raw.ATTESTATION_VBIOS_VERSIONS),
      nonceTtlMs: raw.ATTESTATION_NONCE_TTL_MS as number,
      refreshBeforeMs: raw.ATTESTATION_REFRESH_BEFORE_MS as number,
    },
    agents: {
      toolSecretKey: raw.TOOL_SECRET_KEY ? Buffer.from(raw.TOOL_SECRET_KEY as string, (raw.TOOL_SECRET_KEY as string).length === 64 ? 'hex' : 'base64') : undefined,
      maxSteps: raw.AGENT_MAX_STEPS as number,
      llmStepTimeoutMs: raw.LLM_STEP_TIMEOUT_MS as number,
      botRatePerMinute: raw.BOT_RATE_PER_MIN as number,
      botClientRatePerMinute: raw.BOT_CLIENT_RATE_PER_MIN as number,
      botSessionTtlSeconds: raw.BOT_SESSION_TTL_S as number,
    },
    outbound: {
      allowedPorts,
      allowCidrs,
      caFile: raw.OUTBOUND_CA_FILE as string | undefined,
      connectTimeoutMs: raw.OUTBOUND_CONNECT_TIMEOUT_MS as number,
      totalTimeoutMs: raw.OUTBOUND_TOTAL_TIMEOUT_MS as number,
      maxResponseBytes: parseSize(raw.OUTBOUND_MAX_RESPONSE as string),
      devLocalPorts,
    },
  };
}
