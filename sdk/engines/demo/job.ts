import type { EngineContext, EngineResult } from '../types.js';
import type { Rng } from './seed.js';

/** What each kind family gets: the validated-elsewhere input, the worker context and a seeded PRNG. */
export interface DemoJob {
  kind: string;
  input: Record<string, unknown>;
  ctx: EngineContext;
  rng: Rng;
  seed: Buffer;
  /** The configured --demo-delay-ms, for families that pace their own output (LLM streaming). */
  delayMs: number;
  /** Command for real speech; null forces the tone fallback. */
  espeakNg: string | null;
  /** Speech recognizer for transcription; undefined looks for one on PATH, null never runs one. */
  pocketsphinx: string | null | undefined;
}

export type DemoFamily = (job: DemoJob) => Promise<EngineResult>;

export function abortError(): Error {
  const err = new Error('the job was aborted');
  err.name = 'AbortError';
  return err;
}

export function throwIfAborted(signal: AbortSignal): void {
  if (signal.aborted) throw abortError();
}

/** Waits `ms`, rejecting with an AbortError as soon as the signal fires; 0 ms only checks the signal. */
export function sleep(ms: number, signal: AbortSignal): Promise<void> {
  throwIfAborted(signal);
  if (ms <= 0) return Promise.resolve();
  return new Promise((resolve, reject) => {
    const onAbort = () => {
      clearTimeout(timer);
      reject(abortError());
    };
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal.addEventListener('abort', onAbort, { once: true });
  });
}
