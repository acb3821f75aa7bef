import type { Evidence } from '../attestation/evidence.js';

/**
 * The frames of the worker protocol (docs/worker-protocol.md), both directions, as types only.
 * The gateway checks what arrives against its JSON Schemas (dispatch/worker-frames.ts) and the
 * SDK reads what arrives defensively; what each side sends is typed by these, so a field renamed
 * on one side fails to compile on the other.
 */

export type Tier = 'open' | 'trusted' | 'private';

/** Names the lease a frame is about; `fence` tells its attempts apart. */
export interface LeaseRef {
  lease_id: string;
  fence: number;
}

// ---- worker -> gateway ------------------------------------------------------------------------

/** A lease a reconnecting worker says it still runs, proven by the upload token only its lease frame carried. */
export interface ResumeClaim extends LeaseRef {
  upload_token: string;
}

/**
 * A model a worker serves for a kind (protocol 3; docs/models.md). Jobs naming `input.model`
 * reach only workers that list it; a job naming none reaches any worker of the kind.
 */
export interface WorkerModel {
  /** 1-200 characters: letters, digits and `._:/@+-`, starting with a letter or digit. */
  id: string;
  description?: string;
  /**
   * A JSON Schema (2020-12) for this model's input, extending the kind's: it may add fields and
   * narrow the kind's, and once given the gateway refuses fields neither schema names.
   */
  input_schema?: Record<string, unknown>;
  /** At most this many leases of the model at once on this worker (default: its slots). */
  max_concurrency?: number;
  /**
   * Protocol 6: the worker serves one rank (pipeline stage) of the model, not the whole of it.
   * Absent: the whole model. The count must be the catalogue's for the model, if it has one.
   */
  rank?: ModelRank;
}

/**
 * Which stage of a model split into pipeline stages a worker serves: rank `index` of `count`
 * (0-based). Rank 0 sees the job's input, rank `count - 1` produces its output, the ranks
 * between see only activations (docs/ranks.md).
 */
export interface ModelRank {
  /** 0 to `count - 1`. */
  index: number;
  /** 2 to MAX_RANKS. */
  count: number;
}

/** The models a worker serves, by kind (each kind one of its `kinds`). */
export type WorkerModels = Record<string, WorkerModel[]>;

export interface RegisterFrame {
  type: 'register';
  protocol: number[];
  kinds: string[];
  tier: Tier;
  slots: number;
  hardware?: Record<string, unknown>;
  software?: Record<string, unknown>;
  attestation?: Record<string, unknown>;
  /** Private workers: the EC P-384 public JWK their receipts verify with. */
  receipt_key?: Record<string, unknown>;
  /** Protocol 2: leases brought along after a `reconnect`. */
  resume?: ResumeClaim[];
  /** Protocol 3: the models it serves, by kind. A worker listing none serves its kinds' default model only. */
  models?: WorkerModels;
  /**
   * Protocol 5: the worker's own name for itself, the same on every connection of one worker
   * process (the SDK makes one at start). Registering again under it retires the old connection
   * at once, wherever it is, so the fleet never counts the worker twice.
   */
  identity?: string;
}

/** Protocol 3: replaces the worker's model list without reconnecting (after loading or unloading a model). */
export interface ModelsFrame {
  type: 'models';
  models: WorkerModels;
}

/** Evidence answering the gateway's latest `attest` nonce. */
export interface AttestationFrame {
  type: 'attestation';
  /** The nonce answered (optional for older workers). */
  nonce?: string;
  evidence: Evidence;
}

/**
 * Protocol 5: whether the worker's backend (its inference server) answers. Unavailable, the
 * worker stays connected but is offered no lease until it says available again.
 */
export interface BackendFrame {
  type: 'backend';
  available: boolean;
  /** Why it is unavailable, for operators. */
  message?: string;
}

export interface HeartbeatFrame {
  type: 'heartbeat';
  leases?: string[];
}

/** The `error` of a `fail` frame. */
export interface FailureReport {
  code: string;
  message: string;
  retryable: boolean;
}

export interface ProgressFrame extends LeaseRef {
  type: 'progress';
  progress: number;
  message?: string;
}

export interface LogFrame extends LeaseRef {
  type: 'log';
  line: string;
}

export interface OutputFrame extends LeaseRef {
  type: 'output';
  delta: string;
  /**
   * Protocol 4: the lease's output frames numbered 1, 2, 3... A frame sent again after its
   * answer was lost keeps its number, and the gateway drops one at or below the highest it logged.
   */
  seq?: number;
}

export interface CompleteFrame extends LeaseRef {
  type: 'complete';
  output: { urls: string[] } & Record<string, unknown>;
  /** Private runs: the worker's signed receipt (a compact JWS) over the run, input and artifacts. */
  receipt?: string;
  /** Protocol 7: what the run used, which a per-unit price charges (docs/worker-protocol.md). */
  usage?: WorkUsage;
}

/** What a run used (protocol 7): whole tokens and images, seconds of output; each optional. */
export interface WorkUsage {
  input_tokens?: number;
  output_tokens?: number;
  seconds?: number;
  images?: number;
}

export interface FailFrame extends LeaseRef {
  type: 'fail';
  error: FailureReport;
}

/** The frames about one lease: each is answered, in order, by an `ack` or an `error` naming it. */
export type LeaseReport = ProgressFrame | LogFrame | OutputFrame | CompleteFrame | FailFrame;

export type WorkerFrame = RegisterFrame | AttestationFrame | HeartbeatFrame | ModelsFrame | BackendFrame | LeaseReport;

/** A frame without the lease it is about: what a worker makes before it addresses (or holds) it. */
export type Unaddressed<F> = F extends LeaseRef ? Omit<F, keyof LeaseRef> : F;

// ---- gateway -> worker ------------------------------------------------------------------------

/** What `registered` tells the worker about its registration. */
export interface RegisteredInfo {
  worker_id: string;
  protocol: number;
  heartbeat_ms: number;
  lease_ttl_ms: number;
}

export interface RegisteredFrame extends RegisteredInfo {
  type: 'registered';
  /** Private workers: when their evidence lapses. */
  attestation?: { expires_at: string };
  /** Protocol 2: how the leases claimed in `resume` split. */
  resumed?: string[];
  lost?: string[];
}

/**
 * A file of the job's input, staged by the gateway (docs/files.md). The worker fetches `url`
 * with `Authorization: Bearer <upload_token>` of this lease, which is valid for this lease's
 * files only and only while the lease lives; it never sees the caller's original URL.
 */
export interface LeaseInputFile {
  url: string;
  size: number;
  content_type: string;
  /** Hex sha256 of the bytes: the worker checks what it fetched against it. */
  sha256: string;
}

/** A lease as the gateway sends it. */
export interface LeaseInfo extends LeaseRef {
  run_id: string;
  kind: string;
  tier: Tier;
  attempt: number;
  input: Record<string, unknown>;
  /**
   * Private leases: the gateway's hash of the input, each file field as `sha256:<hex>` of its
   * bytes (the receipt signs the worker's own hash of `input` and `files`). Every rank lease of
   * a private pipeline carries it, though only rank 0 is given the input: the last rank signs it
   * as given (docs/confidentiality.md, "Ranked private runs").
   */
  input_sha256?: string;
  /**
   * Rank leases of a private pipeline whose input has files: the sha256 (hex) of each file by
   * field, which the last rank signs as `input_files`. The bytes (`files`) go to rank 0 only.
   */
  input_files?: Record<string, string>;
  upload_url: string;
  upload_token: string;
  /** The input's files, by the name of the input field that holds each (kinds' file fields are top-level). */
  files?: Record<string, LeaseInputFile>;
  /**
   * Protocol 6: the lease is one rank of a pipeline (docs/ranks.md). Only rank 0 is given the
   * job's `input` and `files`; the other ranks get `input: {}` and see only the activation
   * frames the rank before sends (binary frames, sdk/protocol/pipeline-frame.ts).
   */
  rank?: LeaseRank;
}

/** Which stage of which pipeline a rank lease is. */
export interface LeaseRank {
  /** 0 to `count - 1`. */
  index: number;
  count: number;
  /** The pipeline's id (`pip_...`): every rank lease of one job's attempt shares it. */
  pipeline_id: string;
  /** The model the pipeline runs (rank 0 also finds it in `input.model`). */
  model: string;
  /** The worker id holding each rank, by index: a private pipeline's last rank signs them as its receipt's `ranks`. */
  workers: string[];
}

export interface LeaseFrame extends LeaseInfo {
  type: 'lease';
}

export interface CancelFrame {
  type: 'cancel';
  lease_id: string;
  run_id: string;
  /**
   * Protocol 6, rank leases: why the lease ends. `canceled` (the caller canceled; absent means
   * the same) or `pipeline_ended` (another rank was lost or failed, or the last rank finished:
   * the gateway has ended the lease already, so whatever the worker reports about it is refused),
   * or `timed_out` (the attempt ran past the job's `timeout_s`: the run has failed `timed_out`,
   * and what the worker reports about the lease is refused).
   */
  reason?: 'canceled' | 'pipeline_ended' | 'timed_out';
  /** For `pipeline_ended`: what ended the pipeline, for the worker's log. */
  message?: string;
}

/** Private workers: send evidence for this nonce. */
export interface AttestFrame {
  type: 'attest';
  nonce: string;
}

/** The evidence answering a refresh was accepted. */
export interface AttestedFrame {
  type: 'attested';
  expires_at: string;
}

/** Protocol 2: the instance is stopping; register again elsewhere, claiming the running leases. */
export interface ReconnectFrame {
  type: 'reconnect';
}

/** Finish the current leases, then reconnect; no new ones come. */
export interface DrainFrame {
  type: 'drain';
}

/** Protocol 3: the worker's `models` frame is in force. */
export interface ModelsAcceptedFrame {
  type: 'models_accepted';
}

export interface AckFrame {
  type: 'ack';
  lease_id: string;
  of: LeaseReport['type'];
  /** Protocol 4: answers this many consecutive `output` frames of the lease (absent: one). */
  count?: number;
}

export interface ErrorFrame {
  type: 'error';
  code: string;
  message: string;
  /** Set when it answers (or ends) a lease's frame. */
  lease_id?: string;
  run_id?: string;
  /** The type of the frame it answers. */
  of?: string;
  retryable?: boolean;
  /** `attestation_failed`: the check that failed. */
  reason?: string;
  details?: unknown;
}

export type GatewayFrame = RegisteredFrame | LeaseFrame | CancelFrame | AttestFrame | AttestedFrame | ReconnectFrame | DrainFrame | ModelsAcceptedFrame | AckFrame | ErrorFrame;
