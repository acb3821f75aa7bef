import type { EngineArtifact, EngineResult } from '../engines/types.js';
import { MAX_ERROR_MESSAGE, type CompleteFrame, type FailureReport, type LeaseInfo, type WorkUsage } from '../protocol/index.js';
import { isRecord } from './is-record.js';
import type { AbortCause, FinalReport } from './lease-state.js';
import { UploadError } from './upload.js';

/**
 * What a handler's result or error becomes on the wire. Pure functions: the handler is the
 * caller's code, so everything it returns or throws is checked and cut to the protocol's limits
 * here, before it can make the gateway refuse a frame.
 */

/** The gateway's frame limit is MAX_FRAME_BYTES (1 MiB); a report stays under it with room for the envelope. */
const MAX_REPORT_BYTES = 1_000_000;

export type Outcome = { type: 'complete'; output: CompleteFrame['output']; receipt?: string; usage?: WorkUsage } | { type: 'fail'; error: FailureReport };

export function abortError(message: string): Error {
  return new DOMException(message, 'AbortError');
}

/** `text` cut to at most `max` UTF-16 units without splitting a surrogate pair. */
export function cut(text: string, max: number): string {
  if (text.length <= max) return text;
  let end = max;
  const c = text.charCodeAt(end - 1);
  if (c >= 0xd800 && c <= 0xdbff) end--;
  return text.slice(0, end);
}

export function chunks(text: string, max: number): string[] {
  const out: string[] = [];
  let rest = text;
  while (rest.length > max) {
    const part = cut(rest, max);
    out.push(part);
    rest = rest.slice(part.length);
  }
  if (rest.length || !out.length) out.push(rest);
  return out;
}

function errorCodeOf(value: unknown): string | null {
  if (typeof value !== 'string') return null;
  const code = value
    .toLowerCase()
    .replace(/[^a-z0-9_]+/g, '_')
    .replace(/^[^a-z]+/, '')
    .slice(0, 64);
  return code === '' ? null : code;
}

export function checkResult(result: unknown): EngineResult {
  if (!isRecord(result) || !Array.isArray(result.artifacts)) throw Object.assign(new Error('the handler must resolve to {artifacts: [...], extra?}'), { code: 'bad_result', retryable: false });
  for (const a of result.artifacts as EngineArtifact[]) {
    if (!isRecord(a) || typeof a.name !== 'string' || !(a.data instanceof Uint8Array)) {
      throw Object.assign(new Error('each artifact must be {name, contentType, data: Buffer}'), { code: 'bad_result', retryable: false });
    }
  }
  if (result.extra !== undefined && !isRecord(result.extra)) throw Object.assign(new Error('extra must be an object'), { code: 'bad_result', retryable: false });
  const usage = checkUsage(result.usage);
  const { usage: _given, ...rest } = result;
  return (usage ? { ...rest, usage } : rest) as unknown as EngineResult;
}

/**
 * A handler's `usage` as the gateway takes it: whole tokens and images, seconds, each a finite
 * number >= 0; anything else is left out (a usage the gateway refused would lose the report).
 */
export function checkUsage(usage: unknown): WorkUsage | undefined {
  if (!isRecord(usage)) return undefined;
  const out: WorkUsage = {};
  const ok = (v: unknown): v is number => typeof v === 'number' && Number.isFinite(v) && v >= 0 && v <= 1e9;
  for (const k of ['input_tokens', 'output_tokens', 'images'] as const) if (ok(usage[k])) out[k] = Math.round(usage[k] as number);
  if (ok(usage.seconds)) out.seconds = usage.seconds;
  return Object.keys(out).length ? out : undefined;
}

/** The `fail` error for a lease that ended by `cause` (if aborted) or by `err`. */
export function failureOf(cause: AbortCause | null, err: unknown): FailureReport {
  if (cause === 'canceled') return { code: 'canceled', message: 'canceled by the caller', retryable: false };
  if (cause === 'stopping') return { code: 'worker_stopping', message: 'the worker stopped before finishing', retryable: true };
  if (err instanceof UploadError) return { code: 'upload_failed', message: cut(err.message, MAX_ERROR_MESSAGE), retryable: err.retryable };
  const e = (isRecord(err) ? err : {}) as { code?: unknown; retryable?: unknown; message?: unknown };
  const message = typeof e.message === 'string' && e.message !== '' ? e.message : String(err);
  return {
    code: errorCodeOf(e.code) ?? 'engine_error',
    message: cut(message, MAX_ERROR_MESSAGE),
    retryable: typeof e.retryable === 'boolean' ? e.retryable : true,
  };
}

/**
 * The final report of an outcome. An output the gateway could not take (not JSON, or too big
 * for a frame) turns into a `fail` that says so, rather than a report the gateway refuses.
 */
export function finalReport(info: LeaseInfo, outcome: Outcome): { frame: FinalReport; outcome: Outcome } {
  let frame: FinalReport =
    outcome.type === 'complete'
      ? { type: 'complete', output: outcome.output, ...(outcome.receipt ? { receipt: outcome.receipt } : {}), ...(outcome.usage ? { usage: outcome.usage } : {}) }
      : { type: 'fail', error: outcome.error };
  let text: string | null = null;
  try {
    text = JSON.stringify({ ...frame, lease_id: info.lease_id, fence: info.fence });
  } catch (err) {
    outcome = { type: 'fail', error: { code: 'bad_output', message: `the output is not JSON: ${(err as Error).message}`, retryable: false } };
  }
  if (text !== null && Buffer.byteLength(text) > MAX_REPORT_BYTES) {
    outcome = { type: 'fail', error: { code: 'output_too_large', message: `the output is over ${MAX_REPORT_BYTES} bytes of JSON; return large results as artifacts`, retryable: false } };
  }
  if (outcome.type === 'fail') frame = { type: 'fail', error: outcome.error };
  return { frame, outcome };
}
