import { EnqueueConfirmer } from '../../queues/enqueue-confirmer.js';
import { EnqueueReconciler } from '../../queues/enqueue-reconciler.js';
import { SseStreams } from '../http/sse-streams.js';
import { ChatCompletions } from '../http/openai/chat-completions.js';
import { RunFollower } from '../services/events/run-follower.js';
import { FleetService } from '../services/fleet/fleet-service.js';
import { JobService } from '../services/jobs/job-service.js';
import { BatchService } from '../services/jobs/batch-service.js';
import { BatchFollower } from '../services/events/batch-follower.js';
import { ModelGate } from '../services/jobs/model-gate.js';
import { LlmRunner } from '../services/llm/llm-runner.js';
import { CallerSocketServer } from '../sockets/caller-socket-server.js';
import type { ArtifactStore } from '../../models/artifact-store.js';
import type { FileService } from '../services/files/file-service.js';
import { InputFiles } from '../services/files/input-files.js';
import type { Core } from './core.js';
import type { Fleet } from './fleet.js';
import type { Outbound } from './outbound.js';

/** The callers' side: submitting and following jobs, over HTTP, SSE, the caller socket and the OpenAI surface. */
export interface Callers {
  /** Confirms queue writes in the background (the outbox of accepted runs). */
  confirmer: EnqueueConfirmer;
  /** Enqueues accepted runs whose queue write was never confirmed (a crash between the two). */
  reconciler: EnqueueReconciler;
  jobs: JobService;
  batches: BatchService;
  batchFollower: BatchFollower;
  follower: RunFollower;
  sse: SseStreams;
  callerServer: CallerSocketServer;
  /** LLM steps on the fleet (agent loop, OpenAI surface). */
  llm: LlmRunner;
  fleet: FleetService;
  /** /v1/chat/completions and /v1/models, each completion one llm job (docs/openai.md). */
  openai: ChatCompletions;
}

export function buildCallers(core: Core, fleet: Fleet, outbound: Outbound, files: FileService, artifacts: ArtifactStore): Callers {
  const { config: c, log } = core;
  const confirmer = new EnqueueConfirmer(core.runs, log);
  const models = new ModelGate({ catalogue: core.stores.models });
  const jobs = new JobService({
    runs: core.runs,
    idempotency: core.stores.idempotency,
    queues: core.queues,
    confirmer,
    intake: core.intake,
    prices: c.prices,
    deadlines: c.deadlines,
    attempts: { default: c.jobMaxAttempts, limit: c.jobMaxAttemptsLimit },
    log,
    dispatch: fleet.dispatcher,
    outbound: outbound.guard, // webhook URLs are checked at submission
    metrics: core.metrics,
    models,
    fleet: fleet.dispatcher.fleet,
    replicas: core.replicas,
    inputFiles: new InputFiles({
      files,
      artifacts,
      outbound: outbound.guard,
      publicUrl: core.publicUrl.get,
      dataUriMaxBytes: c.dataUriMaxBytes,
      fetchMaxBytes: c.fileMaxBytes,
      fetchTimeoutMs: c.fileFetchTimeoutMs,
      log,
    }),
  });
  const batches = new BatchService({
    runs: core.runs,
    idempotency: core.stores.idempotency,
    queues: core.queues,
    confirmer,
    prices: c.prices,
    deadlines: c.deadlines,
    attempts: { default: c.jobMaxAttempts, limit: c.jobMaxAttemptsLimit },
    models,
    outbound: outbound.guard,
    dispatch: fleet.dispatcher,
    metrics: core.metrics,
    jobs,
    log,
    replicas: core.replicas,
  });
  const batchFollower = new BatchFollower({ hub: core.hub, log: core.eventLog, runs: core.runs, recheckMs: c.events.pingMs });
  const reconciler = new EnqueueReconciler({
    runs: core.runs,
    queues: core.queues,
    log,
    afterMs: c.enqueueReconcileAfterMs,
    ...(core.replicas ? { queueWrites: core.replicas.queueWrites.bind(core.replicas) } : {}),
    onEnqueued: (run) => fleet.dispatcher.announce(core.queues.queueOf(run)),
  });
  const follower = new RunFollower({ hub: core.hub, log: core.eventLog, runs: core.runs, queueState: (run) => jobs.queueState(run) });
  const sse = new SseStreams({ follower, pingMs: c.events.pingMs, bufferBytes: c.events.clientBufferBytes });
  const callerServer = new CallerSocketServer({
    auth: core.auth,
    gate: core.gate,
    jobs,
    follower,
    log,
    maxMessageBytes: c.jsonBodyLimitBytes,
    maxDepth: c.jsonMaxDepth,
    bufferBytes: c.events.clientBufferBytes,
  });
  const llm = new LlmRunner({ jobs, follower, fleet: fleet.dispatcher.fleet, catalogue: core.stores.models, timeoutMs: c.agents.llmStepTimeoutMs });
  const openai = new ChatCompletions({ llm, log, pingMs: c.events.pingMs, clientBufferBytes: c.events.clientBufferBytes });
  return { confirmer, reconciler, jobs, batches, batchFollower, follower, sse, callerServer, llm, fleet: new FleetService({ fleet: fleet.dispatcher.fleet, queues: core.queues, catalogue: core.stores.models, prices: c.prices }), openai };
}
