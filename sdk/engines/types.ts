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
}

export interface EngineResult {
  artifacts: EngineArtifact[];
  /**
   * Merged into the job's output next to `urls`, e.g. `{ text }` for the LLM and transcription
   * kinds: the fields of the kind's `output_schema` (models/kinds.ts). `urls` and `files` are not
   * the engine's: the gateway writes `files` from its records of the uploads.
   */
  extra?: Record<string, unknown>;
}

export type Engine = (kind: string, input: Record<string, unknown>, ctx: EngineContext) => Promise<EngineResult>;
