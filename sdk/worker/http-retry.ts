import { sleep } from '../client/deadline.js';

/**
 * The retries of the worker's HTTP calls to the gateway (artifact uploads, input file fetches):
 * which answers are worth another try, how long to wait, and the loop that tries again.
 */

/** Answers that may go away on their own: a timeout, rate limiting, a failing or busy gateway. */
export const TRANSIENT_STATUS = new Set([408, 425, 429, 500, 502, 503, 504]);

/** Seconds (or an HTTP date) from Retry-After, in ms, capped; null when absent or unreadable. */
export function retryAfterMs(header: string | null, capMs: number): number | null {
  if (!header) return null;
  const seconds = Number(header);
  const ms = Number.isFinite(seconds) ? seconds * 1000 : Date.parse(header) - Date.now();
  return Number.isFinite(ms) ? Math.min(Math.max(0, ms), capMs) : null;
}

/** The gateway's error envelope `{error: {code, message}}`, or `http_<status>` and the start of the body. */
export async function readError(res: Response): Promise<{ code: string; message: string }> {
  const text = await res.text().catch(() => '');
  try {
    const body = JSON.parse(text) as { error?: { code?: unknown; message?: unknown } };
    if (typeof body.error?.code === 'string') {
      return { code: body.error.code, message: typeof body.error.message === 'string' ? body.error.message : text.slice(0, 300) };
    }
  } catch {
    // not the gateway's envelope
  }
  return { code: `http_${res.status}`, message: text.slice(0, 300) || res.statusText };
}

export interface RetryPlan {
  /** Further tries after a retryable failure. */
  retries: number;
  /** Wait before the first retry, doubled at each one (with jitter). */
  baseDelayMs: number;
  /** How long outages (`503 unavailable`) are waited out on top of `retries`, from the first of them. */
  outageMs: number;
  /** Aborts the waits; the loop rejects with its reason. */
  signal?: AbortSignal;
}

/** What one try came to: a value, or an error with what the loop needs to decide on another try. */
export type TryResult<T> =
  | { ok: true; value: T }
  | {
      ok: false;
      error: Error;
      retryable: boolean;
      /** The gateway cannot reach its datastore (503 `unavailable`), a passing outage. */
      outage: boolean;
      /** The server's Retry-After, when it sent one. */
      waitMs: number | null;
    };

/**
 * Calls `attempt` until it succeeds, fails for good, or the retries run out; then resolves with
 * the value or rejects with the last error. A datastore outage on the gateway's side is waited
 * out (for `outageMs`) without spending the retries.
 */
export async function withRetries<T>(plan: RetryPlan, attempt: () => Promise<TryResult<T>>): Promise<T> {
  let outageSince: number | null = null;
  let retried = 0;
  for (;;) {
    plan.signal?.throwIfAborted();
    const result = await attempt();
    if (result.ok) return result.value;
    if (result.outage) outageSince ??= Date.now();
    const waitingOutOutage = result.outage && Date.now() - outageSince! < plan.outageMs;
    if (!result.retryable || (!waitingOutOutage && retried >= plan.retries)) throw result.error;
    if (!waitingOutOutage) retried++;
    const backoff = plan.baseDelayMs * 2 ** Math.min(Math.max(retried - 1, 0), 6);
    await sleep(result.waitMs ?? backoff / 2 + Math.random() * (backoff / 2), plan.signal);
  }
}
