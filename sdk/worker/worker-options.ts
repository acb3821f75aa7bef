import { randomBytes } from 'node:crypto';
import os from 'node:os';
import type { ClientOptions } from 'ws';
import type { Engine } from '../engines/types.js';
import { WORKER_IDENTITY_PATTERN, workerSocketUrl, type Tier, type WorkerModels } from '../protocol/index.js';
import type { WorkerAttestationOptions } from './attestation.js';
import { isRecord } from './is-record.js';
import { consoleLogger, type WorkerLogger } from './logger.js';
import type { InputFileOptions } from './input-files.js';
import type { UploadOptions } from './upload.js';
import { checkWorkerModels } from './worker-models.js';

export const SDK_VERSION = '0.1.0';

/** Runs one job of one kind: the same signature as an `Engine`. */
export type KindHandler = Engine;

/** One function for every kind, or one per kind (`'*'` is the fallback for kinds not listed). */
export type WorkerHandler = Engine | Record<string, KindHandler>;

export interface ReconnectOptions {
  /** First wait after a lost connection. @defaultValue 250 */
  initialDelayMs?: number;
  /** Longest wait between two tries. @defaultValue 15000 */
  maxDelayMs?: number;
  /** Growth of the wait at each failed try. @defaultValue 2 */
  factor?: number;
}

/** Answers (resolves) when the backend answers; rejects or times out while it is down. */
export type BackendProbe = (signal: AbortSignal) => Promise<unknown>;

export interface BackendWatchOptions {
  /** How the backend is asked whether it answers again; without one, the worker tries again after each wait. */
  probe?: BackendProbe;
  /** First wait before asking; doubles after each failed probe. @defaultValue 1000 */
  firstDelayMs?: number;
  /** Longest wait between two probes. @defaultValue 30000 */
  maxDelayMs?: number;
  /** A probe not answered within this is a failure. @defaultValue 10000 */
  probeTimeoutMs?: number;
}

export interface SwitchyardWorkerOptions {
  /** The gateway's base URL, `http(s)://host[:port][/base]` (`ws(s)://` works too). */
  gateway: string;
  /** A worker token, `swt_...`. */
  token: string;
  /** Kinds served, or `'all'`. Defaults to the keys of a per-kind handler map. */
  kinds?: string[] | 'all';
  /** @defaultValue 'open' */
  tier?: Tier;
  /** Leases run at once, 1 to 64. @defaultValue 1 */
  slots?: number;
  /** Merged over what the SDK detects (platform, arch, cpus, memory_gb). At most 32 keys. */
  hardware?: Record<string, unknown>;
  /** Merged over the SDK's name and version. At most 32 keys. */
  software?: Record<string, unknown>;
  handler: WorkerHandler;
  /** @defaultValue warnings and errors on stderr */
  logger?: WorkerLogger;
  reconnect?: ReconnectOptions;
  /** At most one progress frame per lease per this many ms; the latest value always goes out. @defaultValue 250 */
  progressIntervalMs?: number;
  /** Retries and timeouts of artifact uploads. */
  upload?: Omit<UploadOptions, 'signal'>;
  /** Retries, timeouts and the temporary directory of the input files handlers fetch (`ctx.inputFile`). */
  inputFiles?: InputFileOptions;
  /** How long to wait for the gateway's answer to `complete` or `fail`. @defaultValue 30000 */
  reportTimeoutMs?: number;
  /** Passed to the `ws` client (agent, TLS options, handshakeTimeout...). */
  webSocket?: ClientOptions;
  /** Required with `tier: 'private'`: the receipt key and where evidence comes from (docs/confidentiality.md). */
  attestation?: WorkerAttestationOptions;
  /**
   * The models served, by kind (each one of `kinds`): ids matching MODEL_ID_PATTERN, at most
   * MAX_WORKER_MODELS in all. Unset: the kinds' default model only. Change it later with
   * `worker.setModels()` (e.g. after loading a model). A model given `rank: {index, count}`
   * (protocol 6) is served as that one pipeline stage, never whole; its count must be the
   * catalogue's, or the gateway refuses the worker with `rank_mismatch` (docs/ranks.md).
   */
  models?: WorkerModels;
  /**
   * The worker's name for itself, the same on every connection this process makes (protocol 5):
   * registering again under it retires the old connection at once, on any gateway instance, so
   * the fleet never counts this worker twice. Letters, digits and `._:-`, 1-128 long. Give each
   * worker process its own (two live processes sharing one: the older is refused). @defaultValue
   * a random one per `SwitchyardWorker`
   */
  identity?: string;
  /**
   * What the worker does when its backend (inference server) stops answering: a lease that fails
   * with code `upstream_unavailable` stops the worker taking leases until `probe` resolves (or,
   * without a probe, until a wait that doubles each time is over). The built-in engines give a
   * probe of their server.
   */
  backend?: BackendWatchOptions;
}

/**
 * The options once checked and completed with their defaults. The pieces of the worker read
 * these rather than the caller's object, so each default is decided in one place.
 */
export interface WorkerSettings {
  url: string;
  token: string;
  kinds: string[];
  tier: Tier;
  slots: number;
  handler: WorkerHandler;
  hardware: Record<string, unknown>;
  software: Record<string, unknown>;
  log: WorkerLogger;
  backoff: Required<ReconnectOptions>;
  progressIntervalMs: number;
  reportTimeoutMs: number;
  upload?: Omit<UploadOptions, 'signal'>;
  inputFiles?: InputFileOptions;
  webSocket?: ClientOptions;
  /** The current model list (checked, copied); `setModels` replaces it. */
  models?: WorkerModels;
  identity: string;
  backend: BackendWatchOptions;
}

function defaultHardware(): Record<string, unknown> {
  return { platform: os.platform(), arch: os.arch(), cpus: os.cpus().length, memory_gb: Math.round(os.totalmem() / 2 ** 30) };
}

/**
 * Checks the options and fills in the defaults; throws a TypeError or RangeError naming the
 * first problem. A mistake surfaces in the constructor, not as a refusal at the first connect.
 */
export function resolveWorkerOptions(opts: SwitchyardWorkerOptions): WorkerSettings {
  if (!opts || typeof opts !== 'object') throw new TypeError('SwitchyardWorker needs options');
  const url = workerSocketUrl(opts.gateway);
  if (typeof opts.token !== 'string' || opts.token.trim() === '') throw new TypeError('a worker token is required');
  const tier = opts.tier ?? 'open';
  if (!['open', 'trusted', 'private'].includes(tier)) throw new TypeError(`tier must be open, trusted or private, not ${JSON.stringify(tier)}`);
  const slots = opts.slots ?? 1;
  if (!Number.isInteger(slots) || slots < 1 || slots > 64) throw new RangeError('slots must be a whole number from 1 to 64');

  const isMap = isRecord(opts.handler);
  if (typeof opts.handler !== 'function' && !isMap) throw new TypeError('handler must be a function (kind, input, ctx) or a map kind -> function');
  if (isMap) {
    for (const [kind, fn] of Object.entries(opts.handler)) if (typeof fn !== 'function') throw new TypeError(`the handler of ${kind} is not a function`);
  }
  const requested = opts.kinds ?? (isMap ? Object.keys(opts.handler).filter((k) => k !== '*') : undefined);
  if (requested === undefined) throw new TypeError("kinds is required with a single handler function (a list of kinds, or 'all')");
  let kinds: string[];
  if (requested === 'all') kinds = ['all'];
  else {
    if (!Array.isArray(requested) || requested.length === 0 || requested.length > 64 || requested.some((k) => typeof k !== 'string' || k === '')) {
      throw new TypeError("kinds must be 'all' or a list of 1 to 64 kind names");
    }
    kinds = [...new Set(requested)];
  }
  if (isMap) {
    const map = opts.handler as Record<string, KindHandler>;
    const missing = kinds.includes('all') ? (map['*'] ? [] : ['all']) : kinds.filter((k) => !map[k] && !map['*']);
    if (missing.length) throw new TypeError(`no handler for ${missing.join(', ')} (give one per kind, or a '*' fallback)`);
  }

  const hardware = { ...defaultHardware(), ...(opts.hardware ?? {}) };
  const software = { sdk: 'switchyard-worker', sdk_version: SDK_VERSION, node: process.version, ...(opts.software ?? {}) };
  for (const [name, info] of [['hardware', hardware], ['software', software]] as const) {
    if (Object.keys(info).length > 32) throw new RangeError(`${name} may have at most 32 keys (the SDK adds ${name === 'hardware' ? 4 : 3} of its own; override them to make room)`);
  }
  const settings: WorkerSettings = {
    url,
    token: opts.token,
    kinds,
    tier,
    slots,
    handler: opts.handler,
    hardware,
    software,
    log: opts.logger ?? consoleLogger('warn'),
    backoff: { initialDelayMs: 250, maxDelayMs: 15_000, factor: 2, ...(opts.reconnect ?? {}) },
    progressIntervalMs: opts.progressIntervalMs ?? 250,
    reportTimeoutMs: opts.reportTimeoutMs ?? 30_000,
    upload: opts.upload,
    inputFiles: opts.inputFiles,
    webSocket: opts.webSocket,
    ...(opts.models !== undefined ? { models: checkWorkerModels(opts.models, kinds, slots) } : {}),
    identity: opts.identity ?? `sdk-${randomBytes(12).toString('hex')}`,
    backend: opts.backend ?? {},
  };
  if (typeof settings.identity !== 'string' || !new RegExp(WORKER_IDENTITY_PATTERN).test(settings.identity)) {
    throw new TypeError(`identity must be 1-128 letters, digits and ._:- starting with a letter or digit, not ${JSON.stringify(opts.identity)}`);
  }
  if (settings.backend.probe !== undefined && typeof settings.backend.probe !== 'function') throw new TypeError('backend.probe must be a function (signal) => Promise');
  if (tier === 'private' && !opts.attestation) throw new TypeError("a private worker needs attestation: { evidence: (eatNonce) => Promise<{token, gpus}> }");
  return settings;
}

/** The handler of a kind: the single function, or the map's entry for it, or its `'*'` fallback. */
export function handlerFor(handler: WorkerHandler, kind: string): KindHandler | undefined {
  if (typeof handler === 'function') return handler;
  return handler[kind] ?? handler['*'];
}
