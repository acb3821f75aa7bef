/**
 * One AbortSignal for an operation that ends on the caller's signal or on a timer, whichever
 * comes first, and that remembers which of the two it was (AbortSignal.any and .timeout are
 * avoided: older browsers lack them, and they do not say which source fired).
 */
export class Deadline {
  private readonly controller = new AbortController();
  private timer: ReturnType<typeof setTimeout> | undefined;
  private expired = false;
  private readonly onOuterAbort = () => this.controller.abort(this.outer?.reason);

  /** `timeoutMs` undefined, 0 or not finite: no timer. */
  constructor(readonly timeoutMs: number | undefined, private readonly outer?: AbortSignal) {
    if (outer?.aborted) this.controller.abort(outer.reason);
    else outer?.addEventListener('abort', this.onOuterAbort, { once: true });
    if (timeoutMs !== undefined && timeoutMs > 0 && Number.isFinite(timeoutMs)) {
      this.timer = setTimeout(() => {
        this.expired = true;
        this.controller.abort(new DOMException(`timed out after ${timeoutMs} ms`, 'TimeoutError'));
      }, timeoutMs);
    }
  }

  get signal(): AbortSignal {
    return this.controller.signal;
  }

  /** True when the timer, not the caller, ended the operation. */
  get timedOut(): boolean {
    return this.expired;
  }

  /** True when the caller's own signal fired. */
  get callerAborted(): boolean {
    return !this.expired && this.outer?.aborted === true;
  }

  /** Keeps following the caller's signal but drops the timer (a stream that has connected). */
  stopTimer(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
  }

  /** Aborts whatever still uses the signal (a response body being read). */
  abort(): void {
    this.controller.abort(new DOMException('closed by the client', 'AbortError'));
  }

  dispose(): void {
    this.stopTimer();
    this.outer?.removeEventListener('abort', this.onOuterAbort);
  }
}

/** Resolves after `ms`, or rejects with the signal's reason as soon as it aborts. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal!.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, Math.max(0, ms));
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
