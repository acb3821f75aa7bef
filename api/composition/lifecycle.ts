import type { Logger } from 'pino';

/** A part of the process with something to do at start or at stop (or both). */
export interface LifecyclePart {
  start?(): unknown;
  stop?(): unknown;
}

/**
 * The process's parts in start order. `start()` starts the parts added since the last call;
 * `stop()` stops every started part in the reverse order, so a part stops while what it
 * depends on still runs. A part that fails to start stops those started before it, so a
 * failed start leaves no connection or timer behind.
 */
export class Lifecycle {
  private readonly parts: { name: string; part: LifecyclePart }[] = [];
  private started = 0;

  constructor(private readonly log: Logger) {}

  add(name: string, part: LifecyclePart): void {
    this.parts.push({ name, part });
  }

  async start(): Promise<void> {
    while (this.started < this.parts.length) {
      const { part } = this.parts[this.started];
      try {
        await part.start?.();
      } catch (err) {
        await this.stop();
        throw err;
      }
      this.started++;
    }
  }

  /** Stops in reverse order; one part failing to stop does not keep the others running. */
  async stop(): Promise<void> {
    while (this.started > 0) {
      const { name, part } = this.parts[--this.started];
      try {
        await part.stop?.();
      } catch (err) {
        this.log.error({ err, part: name }, 'a part of the gateway did not stop cleanly');
      }
    }
  }
}
