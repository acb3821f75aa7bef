/**
 * The contract between a worker and whatever produces a job's files. An engine is a pure
 * function of (kind, input): it never touches the network, the worker SDK uploads the
 * artifacts and turns them into `output.urls`.
 */
export interface EngineArtifact {
  name: string;
  contentType: string;
  data: Buffer;
}

export interface EngineContext {
  /** Aborted when the job is cancelled or the worker shuts down; engines reject with an AbortError. */
  signal: AbortSignal;
  /** Fraction done in [0, 1], non-decreasing; 1 is reported last. */
  progress(p: number, message?: string): void;
  log(line: string): void;
  /** Streamed output (LLM tokens); the concatenation of all deltas is the final text. */
  output(delta: string): void;
}

export interface EngineResult {
  artifacts: EngineArtifact[];
  /** Merged into the job's output next to `urls`, e.g. `{ text }` for the LLM and transcription kinds. */
  extra?: Record<string, unknown>;
}

export type Engine = (kind: string, input: Record<string, unknown>, ctx: EngineContext) => Promise<EngineResult>;
