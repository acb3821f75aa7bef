import type { RunErrorCode } from './run-error-codes.js';
import type { JobCost, JobUsage } from './cost-types.js';
export type { JobCost, JobUsage };
import type { SwitchyardFile } from './file-types.js';
export type { FilePage, FileQuota, ListFilesParams, SwitchyardFile, UploadSource } from './file-types.js';

/**
 * The wire shapes of the Switchyard API as the client library sees them (docs/api.md).
 * Plain data only: nothing here imports server code.
 */

export type JobStatus = 'queued' | 'running' | 'succeeded' | 'failed' | 'canceled';
export type Confidentiality = 'open' | 'trusted' | 'private';
export type JobClass = 'interactive' | 'standard' | 'batch';
export type Tier = Confidentiality;
/** Why a queued job is not leased yet (docs/api.md, the job object). */
export type WaitingReason = 'no_worker_for_kind' | 'no_worker_for_model' | 'no_worker_for_rank' | 'backend_unavailable' | 'retry_backoff' | 'concurrency_limit';

export const TERMINAL_STATUSES: readonly JobStatus[] = ['succeeded', 'failed', 'canceled'];

/** Any parsed JSON object. */
export type JsonObject = Record<string, unknown>;

export interface JobOutput {
  /** Absolute artifact URLs, fetchable with a plain GET and no credential. */
  urls: string[];
  /** One entry per URL of `urls`, in the same order, written by the gateway (never the worker) when the run succeeded. */
  files: JobOutputFile[];
  /** The kind's own fields (text, width, duration_s, ...): `output_schema` of /v1/capabilities. */
  [field: string]: unknown;
}

/**
 * A file of a succeeded job's output (docs/api.md, "The job object"). For an artifact stored
 * by the gateway every field is filled from what the gateway recorded at its upload; for any
 * other URL (a worker may report one) only `url` and `name` are known, the rest is null.
 */
export interface JobOutputFile {
  url: string;
  /** The artifact's file name, or the last path segment of another URL. */
  name: string;
  content_type: string | null;
  size: number | null;
  /** Hex sha256 of the bytes, as the gateway hashed them at the upload (the download's ETag). */
  sha256: string | null;
}

/** A file a kind produces, as `/v1/capabilities` describes it (names as the reference engine gives them). */
export interface KindOutputArtifact {
  name: string;
  content_type: string;
  description: string;
  /** Whether every succeeded run of the kind has it. */
  always: boolean;
}

export interface JobErrorInfo {
  /** One of RUN_ERROR_CODES (docs/jobs.md, "Error codes"). */
  code: RunErrorCode | (string & {});
  message: string;
  retryable: boolean;
  /** The attempt it happened on; 0: the job never started. */
  attempt?: number;
  /** A worker's own code when it is none of the list (`code` is then `engine_error`). */
  reported_code?: string;
}

/** One attempt of a job (docs/jobs.md, "Attempts"): `worker` is an opaque id, stable per worker. */
export interface JobAttempt {
  attempt: number;
  worker: string | null;
  tier: Confidentiality | null;
  started_at: string | null;
  ended_at: string | null;
  /** How it ended; null while running or when it succeeded. */
  error: JobErrorInfo | null;
}

/**
 * A job as the gateway describes it. The 202 answer of a submission carries only the fields
 * up to `created_at`; the others are then absent (`undefined`), not null.
 */
export interface Job {
  run_id: string;
  kind: string;
  status: JobStatus;
  confidentiality: Confidentiality;
  class: JobClass;
  /** Scheduler priority, 1 = most urgent. */
  priority: number;
  created_at: string;
  started_at?: string | null;
  finished_at?: string | null;
  /** 0..1, or null before the worker reports any. */
  progress?: number | null;
  attempts?: number;
  /** Seconds it may wait to start, and each attempt may run; null: no deadline (docs/jobs.md, "Deadlines"). */
  ttl_s?: number | null;
  timeout_s?: number | null;
  /** When it fails `expired` if it has not started. */
  expires_at?: string | null;
  /** While running: when the current attempt times out. */
  timeout_at?: string | null;
  /** Leases it may use, and whether a timed-out attempt is retried (docs/jobs.md, "Attempts"). */
  max_attempts?: number | null;
  retry_on_timeout?: boolean;
  /** Every attempt, oldest first. */
  attempt_history?: JobAttempt[];
  /** 1 = next to be leased; null unless queued. */
  queue_position?: number | null;
  /** Why a queued job waits, when the fleet says why; null otherwise. */
  waiting_reason?: WaitingReason | null;
  /** With `no_worker_for_rank`: the ranks of its ranked model no worker could hold now, 0-based, ascending (docs/ranks.md). */
  waiting_ranks?: number[] | null;
  output?: JobOutput | null;
  error?: JobErrorInfo | null;
  attestation?: JsonObject | null;
  /** The batch it was submitted in (submitBatch()); null: submitted alone. */
  batch_id?: string | null;
  /** Credits held at submission (the most it can cost), and taken when it ended (null until then): docs/jobs.md, "Cost". */
  cost?: JobCost;
  /** What the worker reported the run used; null when it reported nothing. */
  usage?: JobUsage | null;
}

/** What every job-returning call gives: the job fields, `terminal`, and the exact parsed JSON. */
export interface JobResult extends Job {
  /** True once the status is succeeded, failed or canceled. */
  terminal: boolean;
  /** Only from get(runId, { include: ['input'] }): the input as the gateway stored it, file fields as references (docs/api.md). */
  input?: JsonObject;
  /** The response body exactly as parsed. */
  raw: JsonObject;
}

export interface SubmitJobBody {
  kind: string;
  /** Forwarded verbatim to the worker; must satisfy the kind's input schema (see capabilities()). */
  input: JsonObject;
  confidentiality?: Confidentiality;
  class?: JobClass;
  /** Seconds it may wait to start, at most its kind's maximum; fails `expired` past it (docs/jobs.md). */
  ttl_s?: number;
  /** Seconds each attempt may run; fails `timed_out` past it. */
  timeout_s?: number;
  /** Leases it may use (1: never retried), at most the gateway's JOB_MAX_ATTEMPTS_LIMIT (docs/jobs.md, "Attempts"). */
  max_attempts?: number;
  /** Retry a timed-out attempt while attempts remain. @defaultValue false */
  retry_on_timeout?: boolean;
  /** https URL POSTed the signed job object when the run ends (docs/webhooks.md). */
  webhook?: string;
  /** Which moments reach the webhook; the gateway's default is `['completed']`. Needs `webhook`. */
  webhook_events_filter?: WebhookEvent[];
}

export interface RequestOptions {
  /** Overrides the client's timeoutMs for this call; 0 = none. */
  timeoutMs?: number;
  signal?: AbortSignal;
}

export interface SubmitOptions extends RequestOptions {
  /** The same key with the same body within 24 h replays the first answer. */
  idempotencyKey?: string;
  /**
   * Sends `Prefer: wait=N`: the gateway holds the answer up to N seconds for the run to end.
   * Without an explicit timeoutMs, the call's timeout grows by those seconds.
   */
  wait?: number;
  /**
   * Called after each file of the input was uploaded (see SwitchyardClient.submit), before the
   * job is submitted: e.g. to tell the user, or to keep the id for a retry.
   */
  onUpload?: (field: string, file: SwitchyardFile) => void;
}

export interface ListJobsParams {
  status?: JobStatus;
  kind?: string;
  /** Only the jobs of this batch (submitBatch()). */
  batch_id?: string;
  /** 1..100, the gateway's default is 20. */
  limit?: number;
  /** The next_cursor of a previous page. */
  cursor?: string;
}

export interface JobPage {
  data: JobResult[];
  /** Pass to list() for the next (older) page; null on the last one. */
  next_cursor: string | null;
  raw: JsonObject;
}

export interface WaitOptions {
  /** Pause between two polls, chosen by the caller. @defaultValue 1000 */
  intervalMs?: number;
  /** Overall deadline; past it, wait() rejects with a SwitchyardTimeoutError carrying the run id. */
  timeoutMs?: number;
  signal?: AbortSignal;
  /** Timeout of each poll (defaults to the client's timeoutMs). */
  requestTimeoutMs?: number;
}

export interface StreamOptions {
  /** Resume after this event id (sent as Last-Event-ID). */
  lastEventId?: number;
  signal?: AbortSignal;
  /** Consecutive failed reconnects before giving up. @defaultValue 5 */
  maxReconnects?: number;
  /** Pause before a reconnect; defaults to the server's `retry:` hint, else 1000 ms. */
  reconnectDelayMs?: number;
}

export interface ProgressData {
  progress: number;
  message?: string;
}

export interface LogData {
  line: string;
  ts: string;
}

export interface OutputData {
  delta: string;
}

/** One frame of GET /v1/jobs/{run_id}/events; `id` is the per-run sequence number. */
export type JobEvent =
  | { id: number; event: 'status'; data: JobResult }
  | { id: number; event: 'progress'; data: ProgressData }
  | { id: number; event: 'log'; data: LogData }
  | { id: number; event: 'output'; data: OutputData }
  | { id: number; event: 'done'; data: JobResult };

export type JobEventName = JobEvent['event'];

export interface TierCounts {
  open: number;
  trusted: number;
  private: number;
}

export interface KindCapability {
  kind: string;
  rollout: 'live' | 'rolling_out';
  description: string;
  /** Workers connected right now, on any gateway instance. */
  workers: number;
  workers_by_tier: TierCounts;
  input_schema: JsonObject;
  /** The files a run of the kind produces. */
  output_artifacts: KindOutputArtifact[];
  /** JSON Schema (2020-12) of a succeeded run's `output`. */
  output_schema: JsonObject;
}

export interface Capabilities {
  kinds: KindCapability[];
}

export interface Capacity {
  workers: { total: number; by_tier: TierCounts };
  slots: { total: number; busy: number; free: number };
  jobs: { queued: number; running: number };
  by_kind: Array<{ kind: string; workers: number; slots_free: number; queued: number }>;
  updated_at: string;
}

export type WebhookEvent = 'start' | 'output' | 'logs' | 'completed';

/**
 * What became of one attempt: `delivered` (2xx), `retrying` (failed, another attempt is
 * scheduled at `next_attempt_at`), `gave_up` (failed, and it was the last attempt), `failed`
 * (the receiver answered 410 Gone: no more attempts).
 */
export type WebhookOutcome = 'delivered' | 'retrying' | 'gave_up' | 'failed';

/**
 * One webhook delivery attempt of a run (GET /v1/jobs/{run_id}/webhooks, docs/webhooks.md).
 * The gateway records and serves attempts in exactly this shape (api/services/webhooks/).
 */
export interface WebhookAttempt {
  /** The `webhook-id` header sent: the same on every attempt of one event. */
  webhook_id: string;
  event: WebhookEvent;
  url: string;
  /** 1 for the first try of that event. */
  attempt: number;
  /** When the attempt started. */
  at: string;
  /** The receiver's status; null when none came. */
  status_code: number | null;
  /** Why no answer came (`timeout`, `connect_failed`, `tls_failed`, `url_blocked`, ...); null when one did. */
  error: string | null;
  duration_ms: number;
  outcome: WebhookOutcome;
  next_attempt_at: string | null;
}

export interface ToolDefinitionInput {
  name: string;
  description: string;
  kind: 'http' | 'webhook';
  method: string;
  /** https only; checked by the gateway's SSRF guard. */
  url: string;
  inputSchema: JsonObject;
  auth?: { type: 'bearer'; token: string };
}

/** A registered tool: its definition without the auth token, which is never returned. */
export interface ToolDefinition extends Omit<ToolDefinitionInput, 'auth'> {
  id: string;
  /** `custom:<id>`, the id bots and agents name it by. */
  tool_id: string;
  auth: { type: string } | null;
  created_at: string;
  /** Webhook tools only, shown once at creation. */
  signing_secret?: string;
}

export interface BotInput {
  name: string;
  model: string;
  systemPrompt: string;
  /** `custom:<id>` tool ids. */
  tools: string[];
  greeting: string;
  allowedOrigins: string[];
}

/** A bot as the gateway answers it (its `view` in api/services/bots/ is typed by this). */
export interface Bot extends BotInput {
  id: string;
  /** Refuses the embed token: only session tokens minted by the owner's backend are accepted. */
  secure: boolean;
  /** Publishable, accepted only from allowedOrigins. */
  embedToken: string;
  chatUrl: string;
  invokeUrl: string;
  wsUrl: string;
  flow: { id: string; status: string; version: number };
  created_at: string;
}

export interface UploadOptions extends RequestOptions {
  /**
   * The file name sent as `?filename=`. Defaults to the path's last segment, or a File's
   * `name`; without one the gateway names it `upload.<extension of its type>`.
   */
  filename?: string;
  /**
   * The Content-Type sent. Defaults to the Blob's `type`, else the type of the file name's
   * extension, else `application/octet-stream` (the gateway then takes the type it reads
   * from the bytes; a declared type that names another format is refused with 415).
   */
  contentType?: string;
}
