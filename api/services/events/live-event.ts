import type { RunEventName } from '../../../models/run-event-log.js';

/**
 * One run event on its way to followers. Its wire forms are built once, on first use, and
 * shared by every follower: with a thousand SSE clients on one run, one string is written
 * a thousand times rather than built a thousand times.
 */
export class LiveEvent {
  private sseFrame?: string;

  constructor(
    readonly id: number,
    readonly event: string,
    /** One line of JSON. */
    readonly data: string,
  ) {}

  static of(id: number, event: RunEventName, data: unknown): LiveEvent {
    return new LiveEvent(id, event, JSON.stringify(data));
  }

  get terminal(): boolean {
    return this.event === 'done';
  }

  /** The SSE frame: `id`, `event`, one `data` line. */
  get sse(): string {
    return (this.sseFrame ??= `id: ${this.id}\nevent: ${this.event}\ndata: ${this.data}\n\n`);
  }

  /** The caller WebSocket frame (docs/api.md "Events"); `data` is spliced in, not re-encoded. */
  wsFrame(runId: string): string {
    return `{"type":"event","run_id":${JSON.stringify(runId)},"id":${this.id},"event":${JSON.stringify(this.event)},"data":${this.data}}`;
  }
}
