import { createHmac, randomBytes } from 'node:crypto';
import type { RedisClient } from '../../models/redis-connection.js';
import type { Logger } from 'pino';
import type { ObservedRunStore } from '../../models/observed-run-store.js';
import type { Stores } from '../../models/stores.js';
import type { JobQueues } from '../../queues/job-queues.js';
import type { Dispatcher } from '../../dispatch/dispatcher.js';
import { ApiError } from '../../models/errors.js';
import { createApp } from '../http/app.js';
import { errorStyleOf } from '../http/route-spec.js';
import { bullBoard } from '../http/middleware/bull-board.js';
import type { SseStreams } from '../http/sse-streams.js';
import type { Config } from '../main/config.js';
import { createLogger } from '../main/logger.js';
import { AccountService } from '../services/accounts/account-service.js';
import { LimitsService } from '../services/accounts/limits-service.js';
import { ArtifactService } from '../services/artifacts/artifact-service.js';
import { ArtifactSweeper } from '../services/artifacts/artifact-sweeper.js';
import { ConsoleSignIn } from '../services/console/console-sign-in.js';
import { FileService } from '../services/files/file-service.js';
import type { RunEventHub } from '../services/events/run-event-hub.js';
import { ModelCatalogue } from '../services/fleet/model-catalogue.js';
import { OperatorService } from '../services/fleet/operator-service.js';
import type { GatewayMetrics } from '../services/metrics/gateway-metrics.js';
import { loadToolSecretKey, verifyToolSecretKey } from '../services/tools/tool-secret-key.js';
import { openArtifactStore } from './artifact-storage.js';
import { buildBots } from './bots.js';
import { buildCallers } from './callers.js';
import { openCore, type Core } from './core.js';
import { buildFleet } from './fleet.js';
import { HttpListener } from './http-listener.js';
import { Lifecycle } from './lifecycle.js';
import { buildOutbound } from './outbound.js';
import { routeSpecs } from './routes.js';
import type { Services } from './services.js';

/** /readyz answers 503 when Redis or the store take longer than this. */
const READY_TIMEOUT_MS = 3_000;

export interface GatewayOptions {
  config: Config;
  /** @defaultValue a pino logger at config.logLevel */
  log?: Logger;
}

/** What a started gateway is made of (tests and the dev commands reach its parts through this). */
interface Parts {
  core: Core;
  services: Services;
  dispatcher: Dispatcher;
  sse: SseStreams;
}

/**
 * One gateway process: RedisClient, the stores, the queues, the HTTP server and the background
 * services, started and stopped together. Any number of them may share one Redis.
 *
 * start() builds the parts (the builders in this folder only construct: no I/O but opening
 * Redis and the stores), then starts them in the order of one list; stop() runs that list
 * backwards, so each part stops while what it depends on still runs.
 */
export class Gateway {
  readonly config: Config;
  readonly log: Logger;
  readonly gatewayId = `gw_${randomBytes(6).toString('hex')}`;
  private readonly lifecycle: Lifecycle;
  private parts?: Parts;
  /** Set when stop() begins: /readyz answers 503 and responses close their connections. */
  private shuttingDown = false;
  /** Aborted when stop() begins, for requests that would otherwise wait past the shutdown. */
  private readonly stopping = new AbortController();

  constructor(opts: GatewayOptions) {
    this.config = opts.config;
    this.log = opts.log ?? createLogger(opts.config.logLevel);
    this.lifecycle = new Lifecycle(this.log);
  }

  /**
   * Connects and listens; resolves with the address actually bound (PORT=0 picks a free port).
   * A failed start closes what it had opened.
   */
  async start(): Promise<{ url: string; port: number }> {
    try {
      return await this.build();
    } catch (err) {
      await this.lifecycle.stop();
      throw err;
    }
  }

  private async build(): Promise<{ url: string; port: number }> {
    const c = this.config;
    const core = await openCore(c, this.log, this.gatewayId, this.lifecycle);
    const toolKey = loadToolSecretKey(c.agents.toolSecretKey, c.dataDir);
    const artifacts = await openArtifactStore(c);
    const files = new FileService({
      store: core.stores.files,
      artifacts,
      maxBytes: c.fileMaxBytes,
      quotaBytes: c.fileQuotaBytes,
      retentionSeconds: c.fileRetentionSeconds,
      publicUrl: core.publicUrl.get,
    });
    const sweeper = new ArtifactSweeper({ store: artifacts, files, log: this.log });
    // Attempt histories name workers by a hash keyed from the tool secret key, which instances sharing a store share.
    const fleet = buildFleet(core, artifacts, createHmac('sha256', toolKey.key).update('switchyard attempt history worker ids').digest());
    const outbound = buildOutbound(core, toolKey);
    const callers = buildCallers(core, fleet, outbound, files, artifacts);
    const bots = buildBots(core, callers, outbound);
    const { stores } = core;
    const services: Services = {
      config: c,
      publicUrl: core.publicUrl.get,
      gate: core.gate,
      auth: core.auth,
      metrics: core.metrics,
      accounts: new AccountService({ accounts: stores.accounts, keys: core.auth, workerTokens: stores.workerTokens }),
      consoleSignIn: new ConsoleSignIn({ redis: core.redis, keys: core.keys, accounts: stores.accounts, auth: core.auth, ttlSeconds: c.console.signInTtlSeconds }),
      limits: new LimitsService({ accounts: stores.accounts, apiKeys: stores.apiKeys, accountMaxRunning: c.accountMaxRunning, keyMaxRunning: c.keyMaxRunning }),
      operators: new OperatorService({ operators: stores.operators, workerTokens: stores.workerTokens, trust: fleet.trust }),
      models: new ModelCatalogue({ models: stores.models }),
      artifacts,
      artifactService: new ArtifactService({
        store: artifacts,
        leases: fleet.leases,
        runs: stores.runs,
        maxBytes: c.artifactMaxBytes,
        retentionSeconds: c.artifactRetentionSeconds,
        publicUrl: core.publicUrl.get,
        redirectDownloads: c.storage === 's3' && c.s3.presignedRedirect,
      }),
      files,
      attestation: fleet.attestation,
      outbound: outbound.guard,
      webhooks: outbound.webhooks,
      tools: outbound.tools,
      jobs: callers.jobs,
      batches: callers.batches,
      batchFollower: callers.batchFollower,
      follower: callers.follower,
      llm: callers.llm,
      sse: callers.sse,
      fleet: callers.fleet,
      openai: callers.openai,
      bots: bots.bots,
      botTurns: bots.botTurns,
      shutdown: this.stopping.signal,
      ready: () => this.ready(core),
    };
    core.metrics.watch({
      queues: core.queues,
      fleet: fleet.dispatcher.fleet,
      catalogue: core.stores.models,
      localWorkers: () => fleet.dispatcher.localWorkers(),
      sseConnections: () => callers.sse.size,
      socketConnections: () => ({ caller: callers.callerServer.size, worker: fleet.workerServer.size, bot: bots.botServer.size }),
      log: this.log,
    });
    const routes = routeSpecs(services);
    const app = createApp({ routes, config: c, auth: core.auth, gate: core.gate, metrics: core.metrics }, this.log);
    // After the router: no route lives under /admin/queues, so its requests fall through to the board.
    app.use(bullBoard({ adminToken: c.adminToken, queues: async () => [...(await core.queues.known()), outbound.webhookQueue.queue] }));
    const http = new HttpListener({
      host: c.host,
      port: c.port,
      handler: app.callback(),
      upgrades: [fleet.workerServer, callers.callerServer, bots.botServer],
      stopping: () => this.shuttingDown,
      errorStyleOf: errorStyleOf(routes),
    });
    this.parts = { core, services, dispatcher: fleet.dispatcher, sse: callers.sse };

    // Start order; stop runs it backwards (docs/operations.md, "Graceful shutdown").
    const l = this.lifecycle;
    l.add('tool secret key', { start: () => this.checkToolKey(core, toolKey) }); // a key that cannot open the stored secrets stops the start here
    l.add('artifact store', { start: () => artifacts.init() });
    l.add('run event hub', { start: () => core.hub.start(), stop: () => core.hub.stop() }); // stops once Prefer: wait requests are answered
    l.add('outbound calls', { stop: () => outbound.guard.close() });
    l.add('webhook deliveries', {
      start: () => outbound.webhookQueue.work({ connection: core.bullConnection, concurrency: 16, log: this.log, deliver: outbound.webhooks.deliver }),
      stop: () => outbound.webhookQueue.close(), // deliveries under way finish; queued ones wait for any instance
    });
    l.add('enqueue confirmer', { stop: () => callers.confirmer.flush() });
    l.add('enqueue reconciler', { start: () => callers.reconciler.start(), stop: () => callers.reconciler.stop() });
    l.add('artifact sweeper', { start: () => sweeper.start(), stop: () => sweeper.stop() });
    l.add('attestation', { start: () => fleet.attestation.start() });
    l.add('operator trust', { start: () => fleet.trust.start() });
    l.add('http connections', { stop: () => http.close() }); // waits for in-flight requests, once everything below has stopped
    l.add('worker sockets', { stop: () => fleet.workerServer.close() });
    // Workers move their leases to another instance (protocol 2) or finish them (older ones, up to SHUTDOWN_DRAIN_MS).
    l.add('dispatcher', { start: () => fleet.dispatcher.start(), stop: () => fleet.dispatcher.stop(c.shutdownDrainMs) });
    l.add('sse streams', { start: () => callers.sse.start(), stop: () => callers.sse.stop() }); // followers are told to reconnect, and resume elsewhere
    l.add('caller sockets', { stop: () => callers.callerServer.close() });
    l.add('bot sockets', { stop: () => bots.botServer.close() });
    let address = { url: c.publicUrl, port: c.port };
    l.add('http listener', {
      start: async () => {
        const bound = await http.listen();
        // PORT=0: links (Location, lease and artifact URLs) use the port actually bound.
        if (c.port === 0) {
          core.publicUrl.settle(bound.url);
          address = bound;
        } else address = { url: c.publicUrl, port: bound.port };
      },
      stop: () => this.closeTheDoor(http),
    });
    await l.start();
    this.log.info({ url: address.url, store: c.mongoUrl ? 'mongodb' : 'redis', gatewayId: this.gatewayId }, 'gateway listening');
    return address;
  }

  /**
   * Graceful stop (docs/operations.md, "Graceful shutdown"); resolves once every connection
   * and Redis client is closed. Safe to call while start() is still under way.
   */
  async stop(): Promise<void> {
    this.shuttingDown = true;
    this.stopping.abort();
    await this.lifecycle.stop();
    this.log.info('gateway stopped');
  }

  // What the parts are, for the dev commands and tests. Only defined once start() built them.
  get core(): Core {
    return this.built.core;
  }
  get services(): Services {
    return this.built.services;
  }
  get redis(): RedisClient {
    return this.built.core.redis;
  }
  get stores(): Stores {
    return this.built.core.stores;
  }
  get runs(): ObservedRunStore {
    return this.built.core.runs;
  }
  get queues(): JobQueues {
    return this.built.core.queues;
  }
  get metrics(): GatewayMetrics {
    return this.built.core.metrics;
  }
  get hub(): RunEventHub {
    return this.built.core.hub;
  }
  get dispatcher(): Dispatcher {
    return this.built.dispatcher;
  }
  get sse(): SseStreams {
    return this.built.sse;
  }

  private get built(): Parts {
    if (!this.parts) throw new Error('the gateway has not been started');
    return this.parts;
  }

  /**
   * New connections are refused at once (the load balancer sends them to another instance)
   * and /readyz answers 503; load balancers that only learn from /readyz get
   * SHUTDOWN_DELAY_MS to notice before the door shuts. In-flight requests go on ('http
   * connections' waits for them).
   */
  private async closeTheDoor(http: HttpListener): Promise<void> {
    if (this.config.shutdownDelayMs > 0) await new Promise((r) => setTimeout(r, this.config.shutdownDelayMs));
    void http.close();
  }

  private async checkToolKey(core: Core, toolKey: ReturnType<typeof loadToolSecretKey>): Promise<void> {
    await verifyToolSecretKey(core.stores.tools, toolKey);
    if (toolKey.origin !== 'environment') {
      this.log.warn(
        { file: toolKey.file, created: toolKey.origin === 'created' },
        'TOOL_SECRET_KEY is not set: tool secrets are sealed with the key kept in this file. Every gateway instance sharing this store must use the same key: set TOOL_SECRET_KEY to its contents on each of them',
      );
    }
  }

  private async ready(core: Core): Promise<void> {
    // Load balancers stop routing here as soon as stop() begins.
    if (this.shuttingDown) throw new ApiError('unavailable', 'not ready: this instance is shutting down', { headers: { 'Retry-After': '1' } });
    // A backing service that hangs must not hang the probe.
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error('readiness check timed out')), READY_TIMEOUT_MS)));
    await Promise.race([Promise.all([core.redis.ping(), core.stores.ping()]), timeout]).finally(() => clearTimeout(timer));
  }
}
