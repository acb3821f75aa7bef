import { MAX_BACKEND_MESSAGE, type BackendFrame } from '../protocol/index.js';
import { cut } from './lease-outcome.js';
import type { WorkerLogger } from './logger.js';
import type { EmitWorkerEvent } from './worker-events.js';
import type { BackendWatchOptions } from './worker-options.js';

export interface BackendWatchContext {
  log: WorkerLogger;
  /** Tells the gateway (over a connection of protocol 5; an older one cannot be told). */
  send(frame: BackendFrame): void;
  emit: EmitWorkerEvent;
}

/**
 * Whether the worker's backend (its inference server: ComfyUI, a Cog container, an
 * OpenAI-compatible server) answers. A lease that failed with `upstream_unavailable` says it
 * does not: the gateway is told (protocol 5 `backend`) and offers the worker no lease, instead
 * of handing it every retry of the job only to fail it in milliseconds, until a probe of the
 * backend succeeds (or, without a probe, the wait is over) and the gateway is told again.
 */
export class BackendWatch {
  private down?: { message: string; delay: number };
  private timer?: NodeJS.Timeout;
  private probing?: AbortController;
  private stopped = false;
  /** Times the backend went down since a lease last succeeded: each makes the first wait longer. */
  private streak = 0;

  constructor(
    private readonly opts: BackendWatchOptions,
    private readonly ctx: BackendWatchContext,
  ) {}

  get available(): boolean {
    return !this.down;
  }

  /** A lease failed with `upstream_unavailable`: no more leases until the backend answers. */
  unavailable(message: string): void {
    if (this.down || this.stopped) return;
    // A backend that answers probes but fails leases is given longer and longer to settle.
    const delay = Math.min((this.opts.firstDelayMs ?? 1_000) * 2 ** this.streak, this.opts.maxDelayMs ?? 30_000);
    this.streak++;
    this.down = { message: cut(message, MAX_BACKEND_MESSAGE), delay };
    this.ctx.log.warn('the backend does not answer: taking no leases until it does', { reason: this.down.message });
    this.ctx.send({ type: 'backend', available: false, message: this.down.message });
    this.ctx.emit('backend', { available: false, message: this.down.message });
    this.schedule();
  }

  /** A lease succeeded: whatever a probe would say, the backend answers. */
  succeeded(): void {
    this.streak = 0;
    if (this.down) this.recovered('a lease succeeded');
  }

  /** A new connection registered: it is told the backend's state if it is down (a new connection starts available). */
  registered(): void {
    if (this.down) this.ctx.send({ type: 'backend', available: false, message: this.down.message });
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
    this.probing?.abort();
  }

  private schedule(): void {
    if (!this.down || this.stopped) return;
    const cap = this.down.delay;
    // Jittered, so the workers of one failed backend do not probe it in step.
    this.timer = setTimeout(() => void this.check(), cap / 2 + Math.random() * (cap / 2));
    this.timer.unref?.();
  }

  private async check(): Promise<void> {
    if (!this.down || this.stopped) return;
    const { probe } = this.opts;
    if (!probe) return this.recovered('the wait is over (no probe to ask the backend)');
    const controller = (this.probing = new AbortController());
    const timeout = setTimeout(() => controller.abort(new Error('the probe timed out')), this.opts.probeTimeoutMs ?? 10_000);
    try {
      await probe(controller.signal);
      if (!controller.signal.aborted) return this.recovered('the probe answered');
      throw controller.signal.reason;
    } catch (err) {
      if (this.stopped || !this.down) return;
      this.down.delay = Math.min(this.down.delay * 2, this.opts.maxDelayMs ?? 30_000);
      this.ctx.log.debug('the backend still does not answer', { reason: (err as Error)?.message ?? String(err) });
      this.schedule();
    } finally {
      clearTimeout(timeout);
      if (this.probing === controller) this.probing = undefined;
    }
  }

  private recovered(why: string): void {
    clearTimeout(this.timer);
    this.down = undefined;
    this.ctx.log.info('the backend answers again: taking leases', { why });
    this.ctx.send({ type: 'backend', available: true });
    this.ctx.emit('backend', { available: true });
  }
}
