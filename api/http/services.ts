import type { FileService } from '../services/files/file-service.js';
import type { Config } from '../main/config.js';
import type { Stores } from '../../models/stores.js';
import type { ApiKeyAuthenticator } from '../services/auth/api-key-authenticator.js';
import type { RequestGate } from '../services/auth/request-gate.js';
import type { RunFollower } from '../services/events/run-follower.js';
import type { SseStreams } from './sse-streams.js';
import type { LlmRunner } from '../services/llm/llm-runner.js';
import type { FleetService } from '../services/fleet/fleet-service.js';
import type { JobService } from '../services/jobs/job-service.js';
import type { ArtifactStore } from '../../models/artifact-store.js'; // artifacts
import type { LeaseStore } from '../../dispatch/lease-store.js'; // artifacts
import type { TrustEnforcer } from '../../dispatch/trust-enforcer.js';
import type { SsrfGuard } from '../services/outbound/ssrf-guard.js';
import type { AttestationService } from '../../dispatch/attestation/attestation-service.js'; // private tier
import type { WebhookService } from '../services/webhooks/webhook-service.js';
import type { BotService } from '../services/bots/bot-service.js'; // bots
import type { BotTurns } from '../services/bots/bot-turns.js'; // bots
import type { ChatCompletions } from './openai/chat-completions.js'; // OpenAI
import type { ToolService } from '../services/tools/tool-service.js'; // tools
import type { GatewayMetrics } from '../services/metrics/gateway-metrics.js'; // metrics

/** What route handlers may use. Built once per gateway by `Gateway` (api/composition/gateway.ts). */
export interface Services {
  config: Config;
  stores: Stores;
  auth: ApiKeyAuthenticator;
  gate: RequestGate;
  jobs: JobService;
  /** The base of every link the gateway hands out; with PORT=0 it is settled once the server listens. */
  publicUrl(): string;
  /** Files accounts upload (`/v1/files`), stored in the artifact store. */
  files: FileService;
  /** Artifact files (uploads, downloads). */
  artifacts: ArtifactStore;
  /** Live leases, read by artifact uploads to check upload tokens. */
  leases: LeaseStore;
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
  /** Announces operator trust changes to every instance, which closes the workers they demote. */
  trust: TrustEnforcer;
  /** The process's Prometheus metrics (`GET /metrics`, docs/operations.md). */
  metrics: GatewayMetrics;
  /** Checks every backing service; throws when one is unreachable. */
  ready(): Promise<void>;
}
