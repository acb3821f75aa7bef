import { randomBytes, randomUUID } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import { createStores } from '../../models/create-stores.js';
import { createRedis } from '../../models/redis-connection.js';
import { RedisKeys } from '../../models/redis/keys.js';
import type { Stores } from '../../models/stores.js';
import { ObservedRunStore } from '../../models/observed-run-store.js';
import { EnqueueConfirmer } from '../../queues/enqueue-confirmer.js';
import { EnqueueReconciler } from '../../queues/enqueue-reconciler.js';
import { JobQueues } from '../../queues/job-queues.js';
import { queueName } from '../../queues/queue-names.js';
import { Dispatcher } from '../../dispatch/dispatcher.js';
import { LeaseStore } from '../../dispatch/lease-store.js';
import { WorkerSocketServer } from '../sockets/worker-socket-server.js';
import { TrustEnforcer } from '../../dispatch/trust-enforcer.js';
import { PrivateRegistrations } from '../../dispatch/private-registration.js'; // private tier
import { ReceiptChecker } from '../../dispatch/receipt-check.js'; // private tier
import { AttestationService } from '../../dispatch/attestation/attestation-service.js'; // private tier
import { ArtifactSweeper } from '../services/artifacts/artifact-sweeper.js'; // artifacts
import { FsArtifactStore } from '../../models/fs-artifact-store.js'; // artifacts
import { createApp } from '../http/app.js';
import { bullBoard } from '../http/middleware/bull-board.js'; // Bull Board
import { CallerSocketServer } from '../sockets/caller-socket-server.js';
import { RunEventHub } from '../services/events/run-event-hub.js';
import { RunEventWriter } from '../services/events/run-event-writer.js';
import { RunFollower } from '../services/events/run-follower.js';
import { SseStreams } from '../http/sse-streams.js';
import { RunEventLog } from '../../models/run-event-log.js';
import { ApiKeyAuthenticator } from '../services/auth/api-key-authenticator.js';
import { RequestGate } from '../services/auth/request-gate.js';
import { ConfigError, type Config } from '../main/config.js';
import { SwitchyardError } from '../../models/errors.js';
import { createLogger } from '../main/logger.js';
import { FleetService } from '../services/fleet/fleet-service.js';
import { JobService } from '../services/jobs/job-service.js';
import { LlmRunner } from '../services/llm/llm-runner.js';
import { ChatCompletions } from '../http/openai/chat-completions.js'; // OpenAI
import type { Services } from './services.js';
import { SsrfGuard } from '../services/outbound/ssrf-guard.js'; // webhooks
import { WebhookAttemptLog } from '../services/webhooks/attempt-log.js'; // webhooks
import { WebhookService } from '../services/webhooks/webhook-service.js'; // webhooks
import { WebhookQueue } from '../../queues/webhook-queue.js'; // webhooks
import { AgentLoop } from '../services/bots/agent-loop.js'; // bots
import { BotRateLimiter } from '../services/bots/bot-rate-limiter.js'; // bots
import { BotService } from '../services/bots/bot-service.js'; // bots
import { BotSocketServer } from '../sockets/bot-socket-server.js'; // bots
import { BotTurns } from '../services/bots/bot-turns.js'; // bots
import { loadToolSecretKey, verifyToolSecretKey } from '../services/tools/tool-secret-key.js';
import { ToolService } from '../services/tools/tool-service.js'; // tools
import { GatewayMetrics } from '../services/metrics/gateway-metrics.js'; // metrics

/** At shutdown, how long in-flight requests may take before their connections are cut. */
const HTTP_GRACE_MS = 10_000;
/** /readyz answers 503 when Redis or the store take longer than this. */
const READY_TIMEOUT_MS = 3_000;

export interface GatewayOptions {
  config: Config;
  /** @defaultValue a pino logger at config.logLevel */
  log?: Logger;
}

/** Answers malformed HTTP (bad headers, oversize headers) with the error envelope instead of a bare 400. */
function answerClientError(err: NodeJS.ErrnoException, socket: import('node:stream').Duplex): void {
  if (!socket.writable || (err as { code?: string }).code === 'ECONNRESET') {
    socket.destroy();
    return;
  }
  const tooLarge = err.code === 'HPE_HEADER_OVERFLOW';
  const status = tooLarge ? '431 Request Header Fields Too Large' : '400 Bad Request';
  const body = JSON.stringify({
    error: { code: 'invalid_request', message: tooLarge ? 'the request headers are too large' : 'the HTTP request is malformed' },
  });
  socket.end(
    `HTTP/1.1 ${status}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n` +
      `X-Request-Id: ${randomUUID()}\r\nConnection: close\r\n\r\n${body}`,
  );
}

/**
 * One gateway process: Redis, the stores, the queues, the HTTP server and the background
 * services, started and stopped together. Any number of them may share one Redis.
 */
export class Gateway {
  readonly config: Config;
  readonly log: Logger;
  redis!: Redis;
  stores!: Stores;
  runs!: ObservedRunStore;
  queues!: JobQueues;
  services!: Services;
  metrics!: GatewayMetrics;
  private server?: http.Server;
  private reconciler?: EnqueueReconciler;
  private artifactSweeper?: ArtifactSweeper; // artifacts
  private webhookQueue?: WebhookQueue; // webhooks
  readonly gatewayId = `gw_${randomBytes(6).toString('hex')}`;
  dispatcher!: Dispatcher;
  private workerServer?: WorkerSocketServer;
  private subscriber?: Redis;
  private bullConnection?: Redis;
  private confirmer?: EnqueueConfirmer;
  hub!: RunEventHub;
  sse?: SseStreams;
  private callerServer?: CallerSocketServer;
  private botServer?: BotSocketServer; // bots
  /** Set when stop() begins: /readyz answers 503 and responses close their connections. */
  shuttingDown = false;
  /** Aborted when stop() begins, for requests that would otherwise wait past the shutdown. */
  private readonly stopping = new AbortController();

  constructor(opts: GatewayOptions) {
    this.config = opts.config;
    this.log = opts.log ?? createLogger(opts.config.logLevel);
  }

  /** Connects and listens; resolves with the address actually bound (PORT=0 picks a free port). */
  async start(): Promise<{ url: string; port: number }> {
    const c = this.config;
    this.redis = createRedis(c.redisUrl, { name: 'api', autoPipelining: true });
    await this.redis.ping();
    this.stores = await createStores({
      redis: this.redis,
      redisPrefix: c.redisPrefix,
      mongoUrl: c.mongoUrl,
      mongoDb: c.mongoDb,
      retentionSeconds: c.runRetentionSeconds,
      fairShareStep: c.fairShareStep,
    });
    // Before anything starts: a key that cannot open the stored tool secrets stops the start here.
    const toolKey = loadToolSecretKey(c.agents.toolSecretKey, c.dataDir);
    await verifyToolSecretKey(this.stores.tools, toolKey).catch(async (err: unknown) => {
      await this.stores.close();
      this.redis.disconnect();
      throw err;
    });
    if (toolKey.origin !== 'environment') {
      this.log.warn(
        { file: toolKey.file, created: toolKey.origin === 'created' },
        'TOOL_SECRET_KEY is not set: tool secrets are sealed with the key kept in this file. Every gateway instance sharing this store must use the same key: set TOOL_SECRET_KEY to its contents on each of them',
      );
    }
    // Every status change, whoever makes it, reaches the event log and webhooks through this.
    const base = this.stores;
    this.runs = new ObservedRunStore(base.runs);
    this.stores = {
      accounts: base.accounts,
      apiKeys: base.apiKeys,
      operators: base.operators,
      workerTokens: base.workerTokens,
      runs: this.runs,
      idempotency: base.idempotency,
      bots: base.bots, // bots
      conversations: base.conversations, // bots
      tools: base.tools,
      ping: () => base.ping(),
      close: () => base.close(),
    };
    this.queues = new JobQueues({ connection: this.redis, prefix: `${c.redisPrefix}:q` });
    // Metrics (begin): one registry per gateway (docs/operations.md, "Metrics"). The services below
    // get it in their options; the live gauges read these objects when Prometheus scrapes.
    this.metrics = new GatewayMetrics({
      queues: this.queues,
      localWorkers: () => this.dispatcher?.localWorkers() ?? [],
      sseConnections: () => this.sse?.size ?? 0,
      socketConnections: () => ({ caller: this.callerServer?.size ?? 0, worker: this.workerServer?.size ?? 0, bot: this.botServer?.size ?? 0 }),
      log: this.log,
    });
    this.runs.onStatusChange(this.metrics.statusChanged);
    // Metrics (end)
    const gate = new RequestGate({ redis: this.redis, keys: new RedisKeys(c.redisPrefix), perSecond: c.rateLimitPerSecond, burst: c.rateLimitBurst });
    this.subscriber = createRedis(c.redisUrl, { name: `sub-${this.gatewayId}`, blocking: true });
    this.bullConnection = createRedis(c.redisUrl, { name: 'dispatch', blocking: true });
    const leases = new LeaseStore(this.redis, c.redisPrefix);
    // Live events (begin): the per-run log, its fan-out on the shared subscriber, SSE streams.
    const eventLog = new RunEventLog({ redis: this.redis, prefix: c.redisPrefix, maxLength: c.events.logMax, ttlMs: c.runRetentionSeconds * 1000 });
    const eventWriter = new RunEventWriter(eventLog, this.log);
    this.runs.onStatusChange(eventWriter.statusChanged);
    this.hub = new RunEventHub({ subscriber: this.subscriber, log: eventLog, prefix: c.redisPrefix, logger: this.log });
    this.hub.start();
    // Live events (end)
    this.dispatcher = new Dispatcher({
      redis: this.redis,
      subscriber: this.subscriber,
      bullConnection: this.bullConnection,
      prefix: c.redisPrefix,
      queuePrefix: `${c.redisPrefix}:q`,
      runs: this.stores.runs,
      fleetTtlMs: Math.max(3 * c.heartbeatMs, 3000),
      leases,
      log: this.log,
      publicUrl: () => this.config.publicUrl,
      maxAttempts: c.jobMaxAttempts,
      gatewayId: this.gatewayId,
      leaseTtlMs: c.leaseTtlMs,
      heartbeatMs: c.heartbeatMs,
      events: eventWriter,
      metrics: this.metrics, // metrics
      // Private tier: receipts are checked against the artifact store, built further down.
      receipts: new ReceiptChecker({ artifacts: () => this.services?.artifacts, publicUrl: () => this.config.publicUrl }),
    });
    await this.dispatcher.start();
    // Private tier (begin): evidence of private workers, checked at registration and refreshed (docs/confidentiality.md).
    const attestation = new AttestationService({ redis: this.redis, prefix: c.redisPrefix, config: c.attestation });
    await attestation.start();
    const privateWorkers = new PrivateRegistrations({ service: attestation, dispatcher: this.dispatcher, log: this.log, refreshBeforeMs: c.attestation.refreshBeforeMs, nonceTtlMs: c.attestation.nonceTtlMs });
    // Private tier (end)
    // Operator trust changes reach the workers registered on every instance (docs/confidentiality.md).
    const trust = new TrustEnforcer({ redis: this.redis, subscriber: this.subscriber, prefix: c.redisPrefix, operators: this.stores.operators, dispatcher: this.dispatcher, log: this.log });
    await trust.start();
    this.workerServer = new WorkerSocketServer({
      dispatcher: this.dispatcher,
      workerTokens: this.stores.workerTokens,
      operators: this.stores.operators,
      gatewayId: this.gatewayId,
      log: this.log,
      trust,
      attestation: privateWorkers, // private tier
    });
    this.confirmer = new EnqueueConfirmer(this.stores.runs, this.log);
    // Webhooks (begin): one SSRF guard for every outbound call; a delivery is queued when a run
    // starts or ends, and every instance's webhook worker sends them (docs/webhooks.md).
    const outbound = new SsrfGuard(c.outbound);
    this.webhookQueue = new WebhookQueue({ connection: this.redis, prefix: `${c.redisPrefix}:q`, retryDelaysMs: c.webhooks.retryDelaysMs });
    const webhooks = new WebhookService({
      queue: this.webhookQueue,
      attempts: new WebhookAttemptLog({ redis: this.redis, keys: new RedisKeys(c.redisPrefix), ttlSeconds: c.runRetentionSeconds }),
      accounts: this.stores.accounts,
      outbound,
      log: this.log,
      metrics: this.metrics, // metrics
    });
    this.runs.onStatusChange(webhooks.statusChanged);
    this.webhookQueue.work({ connection: this.bullConnection, concurrency: 16, log: this.log, deliver: webhooks.deliver });
    // Webhooks (end)
    // Tools (begin): custom tools, secrets sealed with TOOL_SECRET_KEY, every call through the SSRF guard (docs/tools.md).
    const tools = new ToolService({ store: this.stores.tools, outbound, secretKey: toolKey.key, metrics: this.metrics });
    // Tools (end)
    const jobs = new JobService({
      runs: this.stores.runs,
      idempotency: this.stores.idempotency,
      queues: this.queues,
      confirmer: this.confirmer,
      prices: c.prices,
      log: this.log,
      dispatch: this.dispatcher,
      outbound, // webhooks: URLs checked at submission
      metrics: this.metrics, // metrics
    });
    const follower = new RunFollower({ hub: this.hub, log: eventLog, runs: this.runs, position: (run) => jobs.position(run) });
    this.sse = new SseStreams({ follower, pingMs: c.events.pingMs, bufferBytes: c.events.clientBufferBytes });
    this.sse.start();
    const auth = new ApiKeyAuthenticator({ apiKeys: this.stores.apiKeys, gate, cacheTtlMs: c.keyCacheTtlMs });
    this.callerServer = new CallerSocketServer({
      auth,
      gate,
      jobs,
      follower,
      log: this.log,
      maxMessageBytes: c.jsonBodyLimitBytes,
      maxDepth: c.jsonMaxDepth,
      bufferBytes: c.events.clientBufferBytes,
    });
    // Bots (begin): bots and the gate of their surfaces; their turns are wired below, once the LLM runner exists.
    const bots = new BotService({ store: this.stores.bots, auth, gate, tools, config: c });
    // Bots (end)
    this.services = {
      config: c,
      stores: this.stores,
      gate,
      outbound, // webhooks
      webhooks, // webhooks
      bots, // bots
      tools, // tools
      metrics: this.metrics, // metrics
      auth,
      jobs,
      follower,
      llm: new LlmRunner({ jobs, follower, fleet: this.dispatcher.fleet, timeoutMs: c.agents.llmStepTimeoutMs }),
      sse: this.sse,
      fleet: new FleetService({ fleet: this.dispatcher.fleet, queues: this.queues }),
      trust,
      attestation, // private tier
      shutdown: this.stopping.signal,
      ready: async () => {
        // Shutdown: load balancers stop routing here as soon as stop() begins.
        if (this.shuttingDown) throw new SwitchyardError('unavailable', 'not ready: this instance is shutting down', { headers: { 'Retry-After': '1' } });
        // A backing service that hangs must not hang the probe.
        let timer: NodeJS.Timeout | undefined;
        const timeout = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error('readiness check timed out')), READY_TIMEOUT_MS)));
        await Promise.race([Promise.all([this.redis.ping(), this.stores.ping()]), timeout]).finally(() => clearTimeout(timer));
      },
    };

    // OpenAI (begin): /v1/chat/completions and /v1/models, each completion one llm job (docs/openai.md).
    this.services.openai = new ChatCompletions({ llm: this.services.llm, log: this.log, pingMs: c.events.pingMs, clientBufferBytes: c.events.clientBufferBytes });
    // OpenAI (end)

    // Bots (begin): a turn runs the agent loop on llm jobs paid by the bot's owner; wsUrl is served on the upgrade (docs/bots.md).
    this.services.botTurns = new BotTurns({
      bots,
      conversations: this.stores.conversations,
      loop: new AgentLoop({ llm: this.services.llm, tools, maxSteps: c.agents.maxSteps, log: this.log }),
      llm: this.services.llm,
      limiter: new BotRateLimiter({ redis: this.redis, keys: new RedisKeys(c.redisPrefix), perBotPerMinute: c.agents.botRatePerMinute, perClientPerMinute: c.agents.botClientRatePerMinute }),
    });
    this.botServer = new BotSocketServer({
      bots,
      turns: this.services.botTurns,
      log: this.log,
      trustProxy: c.trustProxy,
      maxMessageBytes: c.jsonBodyLimitBytes,
      maxDepth: c.jsonMaxDepth,
    });
    // Bots (end)

    // Artifacts (begin): files under DATA_DIR/artifacts, upload tokens checked against live leases, retention sweeps.
    const artifacts = new FsArtifactStore({ root: `${c.dataDir}/artifacts` });
    await artifacts.init();
    this.services.artifacts = artifacts;
    this.services.leases = new LeaseStore(this.redis, c.redisPrefix);
    this.artifactSweeper = new ArtifactSweeper({ store: artifacts, log: this.log });
    this.artifactSweeper.start();
    // Artifacts (end)

    this.reconciler = new EnqueueReconciler({
      runs: this.stores.runs,
      queues: this.queues,
      log: this.log,
      afterMs: c.enqueueReconcileAfterMs,
      onEnqueued: (run) => this.dispatcher.announce(queueName(run.kind, run.confidentiality)),
    });
    this.reconciler.start();

    const app = createApp(this.services, this.log);
    // Bull Board (begin): /admin/queues over this process's own Queue objects, behind ADMIN_TOKEN (docs/operations.md).
    // After the router: no route lives under /admin/queues, so its requests fall through to here.
    app.use(bullBoard({ adminToken: c.adminToken, queues: [...this.queues.all(), this.webhookQueue.queue] }));
    // Bull Board (end)
    // No whole-request deadline (a large artifact upload may rightly take minutes); a socket idle
    // for two minutes is closed instead, and headers must arrive within 20 s.
    const server = http.createServer({ requestTimeout: 0, headersTimeout: 20_000, keepAliveTimeout: 65_000 }, app.callback());
    server.setTimeout(120_000);
    server.on('clientError', answerClientError);
    // Shutdown: answers given while stopping close their connection, so keep-alive clients
    // open their next one through the load balancer to another instance.
    server.prependListener('request', (_req, res) => {
      if (this.shuttingDown) res.setHeader('Connection', 'close');
    });
    server.on('upgrade', (req, socket, head) => {
      if (!this.workerServer?.handleUpgrade(req, socket, head) && !this.callerServer?.handleUpgrade(req, socket, head) && !this.botServer?.handleUpgrade(req, socket, head)) socket.destroy();
    });
    this.server = server;
    await new Promise<void>((resolve, reject) => {
      server.once('error', (err: NodeJS.ErrnoException) => {
        // The one setting that fixes it, named: the raw EADDRINUSE does not say what to change.
        if (err.code === 'EADDRINUSE') reject(new ConfigError([`PORT ${c.port} on ${c.host} is already in use: stop what listens there, or set PORT to another port (PORT=0 picks a free one)`]));
        else if (err.code === 'EACCES') reject(new ConfigError([`PORT ${c.port} on ${c.host} needs privileges this process does not have: set PORT to 1024 or above`]));
        else reject(err);
      });
      server.listen(c.port, c.host, () => resolve());
    });
    const port = (server.address() as AddressInfo).port;
    const url = c.port === 0 ? `http://${c.host === '0.0.0.0' ? '127.0.0.1' : c.host}:${port}` : c.publicUrl;
    // PORT=0 without PUBLIC_URL: links (Location, lease and artifact URLs) use the port actually bound.
    if (c.port === 0 && c.publicUrl.endsWith(':0')) c.publicUrl = url;
    this.log.info({ url, store: c.mongoUrl ? 'mongodb' : 'redis' }, 'gateway listening');
    return { url, port };
  }

  /**
   * Graceful stop (docs/operations.md, "Graceful shutdown"); resolves once every connection
   * and Redis client is closed.
   */
  async stop(): Promise<void> {
    // Shutdown (begin): new connections are refused at once (the load balancer sends them to
    // another instance) and /readyz answers 503. Event followers are told to reconnect, and
    // resume there; workers move their leases to another instance (protocol 2) or finish them
    // (older ones, up to SHUTDOWN_DRAIN_MS). In-flight requests finish, Redis is still up for them.
    this.shuttingDown = true;
    this.stopping.abort();
    // Load balancers that only learn from /readyz get SHUTDOWN_DELAY_MS to notice before the door shuts.
    if (this.config.shutdownDelayMs > 0) await new Promise((r) => setTimeout(r, this.config.shutdownDelayMs));
    const httpClosed = this.closeHttp();
    this.sse?.stop();
    this.callerServer?.close();
    this.botServer?.close(); // bots
    await this.dispatcher?.stop(this.config.shutdownDrainMs);
    this.workerServer?.close();
    await httpClosed;
    // Prefer: wait requests follow runs through the hub: it stops once they are answered.
    this.hub?.stop();
    // Shutdown (end)
    await this.reconciler?.stop();
    await this.artifactSweeper?.stop(); // artifacts
    await this.confirmer?.flush();
    // Webhooks (begin): deliveries under way finish; queued ones wait for any instance.
    await this.webhookQueue?.close();
    this.services?.outbound.close();
    // Webhooks (end)
    await this.queues?.close();
    await this.stores?.close();
    await this.redis?.quit().catch(() => this.redis.disconnect());
    for (const extra of [this.subscriber, this.bullConnection]) await extra?.quit().catch(() => extra.disconnect());
    this.log.info('gateway stopped');
  }

  /**
   * Stops listening and resolves when every connection has ended: requests in flight finish,
   * keep-alive connections close as they go idle, and after HTTP_GRACE_MS whatever is still
   * open (a stuck client) is cut so shutdown cannot hang.
   */
  private closeHttp(): Promise<void> {
    const server = this.server;
    if (!server) return Promise.resolve();
    return new Promise<void>((resolve) => {
      const idle = setInterval(() => server.closeIdleConnections(), 100);
      const force = setTimeout(() => server.closeAllConnections(), HTTP_GRACE_MS);
      server.close(() => {
        clearInterval(idle);
        clearTimeout(force);
        resolve();
      });
    });
  }
}
