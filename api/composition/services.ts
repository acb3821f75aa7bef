import type { AttestationService } from '../../dispatch/attestation/attestation-service.js'; // private tier
import type { ArtifactStore } from '../../models/artifact-store.js';
import type { ChatCompletions } from '../http/openai/chat-completions.js'; // OpenAI
import type { SseStreams } from '../http/sse-streams.js';
import type { Config } from '../main/config.js';
import type { ConsoleSignIn } from '../services/console/console-sign-in.js';
import type { AccountService } from '../services/accounts/account-service.js';
import type { LimitsService } from '../services/accounts/limits-service.js';
import type { ArtifactService } from '../services/artifacts/artifact-service.js';
import type { ApiKeyAuthenticator } from '../services/auth/api-key-authenticator.js';
import type { RequestGate } from '../services/auth/request-gate.js';
import type { BotService } from '../services/bots/bot-service.js'; // bots
import type { BotTurns } from '../services/bots/bot-turns.js'; // bots
import type { RunFollower } from '../services/events/run-follower.js';
import type { FileService } from '../services/files/file-service.js';
import type { FleetService } from '../services/fleet/fleet-service.js';
import type { ModelCatalogue } from '../services/fleet/model-catalogue.js';
import type { OperatorService } from '../services/fleet/operator-service.js';
import type { JobService } from '../services/jobs/job-service.js';
import type { BatchService } from '../services/jobs/batch-service.js';
import type { BatchFollower } from '../services/events/batch-follower.js';
import type { LlmRunner } from '../services/llm/llm-runner.js';
import type { GatewayMetrics } from '../services/metrics/gateway-metrics.js'; // metrics
import type { SsrfGuard } from '../services/outbound/ssrf-guard.js';
import type { ToolService } from '../services/tools/tool-service.js'; // tools
import type { WebhookService } from '../services/webhooks/webhook-service.js';

/**
 * The services of one gateway, built once by `Gateway` (api/composition/gateway.ts). No route
 * module sees this bag: `routeSpecs` (api/composition/routes.ts) hands each the few it calls.
 * Tests and the dev commands reach them through `Gateway.services`.
 */
export interface Services {
  config: Config;
  auth: ApiKeyAuthenticator;
  gate: RequestGate;
  jobs: JobService;
  /** Batches of jobs (docs/jobs.md, "Batches") and their one event stream each. */
  batches: BatchService;
  batchFollower: BatchFollower;
  /** The base of every link the gateway hands out; with PORT=0 it is settled once the server listens. */
  publicUrl(): string;
  /** Accounts: opening them, balances, their worker tokens. */
  accounts: AccountService;
  /** One-time sign-in links of the web console. */
  consoleSignIn: ConsoleSignIn;
  /** Concurrency limits and fair-share weights of accounts and keys. */
  limits: LimitsService;
  /** Worker operators, their trust and worker tokens. */
  operators: OperatorService;
  /** The model catalogue as operators manage it (docs/models.md). */
  models: ModelCatalogue;
  /** Files accounts upload (`/v1/files`), stored in the artifact store. */
  files: FileService;
  /** The artifact store itself: the bytes of artifacts and account files. */
  artifacts: ArtifactStore;
  /** Run artifacts: worker uploads checked against their lease, input files, downloads. */
  artifactService: ArtifactService;
  /** Follows runs for callers (SSE, WebSocket, `Prefer: wait`). */
  follower: RunFollower;
  /** Aborted when the gateway starts to stop: requests that wait answer at once instead of being cut. */
  shutdown: AbortSignal;
  /** Runs LLM steps on the fleet (agent loop, OpenAI surface). */
  llm: LlmRunner;
  /** The process's open SSE streams. */
  sse: SseStreams;
  /** The one way to call a URL an account gave (webhooks, tools, bots): the SSRF guard. */
  outbound: SsrfGuard;
  /** Webhook deliveries and the accounts' signing secrets. */
  webhooks: WebhookService;
  /** Custom tools: registration, resolution for bots, calls for the agent loop (docs/tools.md). */
  tools: ToolService;
  /** The OpenAI-compatible surface (docs/openai.md). */
  openai: ChatCompletions;
  /** Bots: CRUD, sessions and the gate of the bot surfaces (docs/bots.md). */
  bots: BotService;
  /** Bot turns (invoke, the bot socket): the agent loop over a conversation. */
  botTurns: BotTurns;
  /** The live fleet: capabilities and capacity. */
  fleet: FleetService;
  /** Private workers' current evidence, for audits (`GET /v1/attestation/workers/{id}`). */
  attestation: AttestationService;
  /** The process's Prometheus metrics (`GET /metrics`, docs/operations.md). */
  metrics: GatewayMetrics;
  /** Checks every backing service; throws when one is unreachable. */
  ready(): Promise<void>;
}
