import type { WorkUsage } from '../protocol/index.js';

/**
 * The contract between a worker and whatever produces a job's files. An engine is a pure
 * function of (kind, input, input files): it never touches the network, the worker SDK fetches
 * the input's files (`ctx.inputFile`), uploads the artifacts and turns them into `output.urls`.
 */
export interface EngineArtifact {
  name: string;
  contentType: string;
  data: Buffer;
}

/** A file of the job's input, fetched from the gateway to a local path and checked against its sha256. */
export interface InputFile {
  path: string;
  size: number;
  contentType: string;
  /** Hex sha256 of the bytes at `path`. */
  sha256: string;
}

export interface EngineContext {
  /** The run the lease is for, set by the worker SDK; absent when an engine is called outside a worker. */
  runId?: string;
  /** Aborted when the job is cancelled or the worker shuts down; engines reject with an AbortError. */
  signal: AbortSignal;
  /** Fraction done in [0, 1], non-decreasing; 1 is reported last. */
  progress(p: number, message?: string): void;
  log(line: string): void;
  /** Streamed output (LLM tokens); the concatenation of all deltas is the final text. */
  output(delta: string): void;
  /**
   * The file held by input field `field`, fetched once to a temporary path that is removed when
   * the lease ends. Rejects with a non-retryable error (code `bad_input`) when the lease has no
   * file for that field.
   */
  inputFile(field: string): Promise<InputFile>;
  /**
   * Set when the lease is one rank (pipeline stage) of a ranked model (protocol 6,
   * docs/ranks.md): the handler runs that stage only, exchanging binary frames with the ranks
   * before and after it. Absent for a lease of a whole model.
   */
  rank?: RankContext;
}

/**
 * One rank of a pipeline, as its handler sees it. Only rank 0 is given the job's input (the
 * others get `{}`); only the last rank's output, streamed text and artifacts are the run's. The
 * frames go through the gateway: rank i's to rank i+1, the last rank's back to rank 0.
 */
export interface RankContext {
  /** 0 to `count - 1`. */
  index: number;
  count: number;
  /** The pipeline's id (`pip_...`), shared by every rank lease of the job's attempt. */
  pipelineId: string;
  /** The model the pipeline runs. */
  model: string;
  /** The worker id holding each rank, by index. */
  workers: string[];
  first: boolean;
  last: boolean;
  /**
   * Incoming frames' payloads, in order; ends after the frame flagged `end` from the rank before
   * (rank 0: from the last rank). Throws the lease's AbortError once the lease is aborted (a
   * cancel, a lost connection, the pipeline ended). Frames that arrive before the handler
   * iterates are kept for it. One iteration at a time: a second one goes on where the first
   * stopped.
   */
  frames: AsyncIterable<Uint8Array>;
  /**
   * Sends one payload on (rank i -> i+1, last rank -> rank 0), at most MAX_PIPELINE_PAYLOAD
   * bytes. Resolves once the frame is written to the socket: await it, it is the pipeline's
   * back-pressure. Rejects after `end()` or once the lease is aborted.
   */
  send(payload: Uint8Array): Promise<void>;
  /** Ends this rank's stream (a frame with the end flag, empty payload). Idempotent; the SDK calls it when the handler returns. */
  end(): Promise<void>;
}

export interface EngineResult {
  artifacts: EngineArtifact[];
  /**
   * Merged into the job's output next to `urls`, e.g. `{ text }` for the LLM and transcription
   * kinds: the fields of the kind's `output_schema` (models/kinds.ts). `urls` and `files` are not
   * the engine's: the gateway writes `files` from its records of the uploads.
   */
  extra?: Record<string, unknown>;
  /**
   * What the job used, reported in the `complete` frame (protocol 7) and charged when its kind
   * has a per-unit price (docs/jobs.md, "Cost"): tokens for LLMs, seconds of output for audio
   * and video, images. Absent: the run is charged its whole reservation.
   */
  usage?: WorkUsage;
}

export type Engine = (kind: string, input: Record<string, unknown>, ctx: EngineContext) => Promise<EngineResult>;
