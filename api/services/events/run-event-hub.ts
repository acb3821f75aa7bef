import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import { RunEventLog, type LoggedRunEvent } from '../../../models/run-event-log.js';
import { LiveEvent } from './live-event.js';

/** Events read back from the log per round trip. */
const REFILL_PAGE = 1000;

export type RunEventListener = (event: LiveEvent) => void;

interface RunGroup {
  listeners: Set<RunEventListener>;
  /** Highest event number handed to the listeners. */
  lastId: number;
  /** Highest event number received or queued for delivery: a jump past it means missed messages. */
  seenId: number;
  /** Delivery is serialized per run, so a gap refill from the log cannot reorder events. */
  chain: Promise<void>;
  subscribed: Promise<unknown>;
}

export interface RunEventHubOptions {
  /** The process's one subscriber connection (shared with the dispatcher's channels). */
  subscriber: Redis;
  log: RunEventLog;
  logger: Logger;
}

/**
 * Live fan-out of run events inside one gateway process: one Redis SUBSCRIBE per run that
 * has local followers (SSE streams, WebSocket subscriptions, `Prefer: wait`), however many
 * followers there are, on the process's one subscriber connection. Each event is parsed
 * and formatted once and handed to every follower.
 */
export class RunEventHub {
  private readonly runs = new Map<string, RunGroup>();
  private readonly channelPrefix: string;
  private readonly onMessage = (channel: string, message: string) => {
    if (!channel.startsWith(this.channelPrefix)) return;
    const group = this.runs.get(channel.slice(this.channelPrefix.length));
    if (!group) return;
    const runId = channel.slice(this.channelPrefix.length);
    this.enqueue(runId, group, RunEventLog.parseMessage(message));
  };
  // Messages published while the subscriber was reconnecting are lost to pub/sub: read them
  // back from the log for every run still followed here.
  private readonly onReady = () => {
    for (const [runId, group] of this.runs) {
      group.chain = group.chain.then(() => this.refill(runId, group, Number.MAX_SAFE_INTEGER));
    }
  };

  constructor(private readonly opts: RunEventHubOptions) {
    this.channelPrefix = opts.log.channel('');
  }

  start(): void {
    this.opts.subscriber.on('message', this.onMessage);
    this.opts.subscriber.on('ready', this.onReady);
  }

  stop(): void {
    this.opts.subscriber.off('message', this.onMessage);
    this.opts.subscriber.off('ready', this.onReady);
    this.runs.clear();
  }

  /** Number of runs with local followers (for metrics and tests). */
  get followedRuns(): number {
    return this.runs.size;
  }

  /**
   * Adds a follower of a run's live events; resolves once Redis has confirmed the
   * subscription, so every event appended afterwards reaches `listener`. Returns the
   * function that removes it.
   */
  async subscribe(runId: string, listener: RunEventListener): Promise<() => void> {
    let group = this.runs.get(runId);
    if (!group) {
      group = { listeners: new Set(), lastId: 0, seenId: 0, chain: Promise.resolve(), subscribed: this.opts.subscriber.subscribe(this.opts.log.channel(runId)) };
      this.runs.set(runId, group);
    }
    group.listeners.add(listener);
    const g = group;
    try {
      await g.subscribed;
    } catch (err) {
      this.remove(runId, g, listener);
      throw err;
    }
    return () => this.remove(runId, g, listener);
  }

  private remove(runId: string, group: RunGroup, listener: RunEventListener): void {
    group.listeners.delete(listener);
    if (group.listeners.size > 0 || this.runs.get(runId) !== group) return;
    this.runs.delete(runId);
    this.opts.subscriber.unsubscribe(this.opts.log.channel(runId)).catch(() => {});
  }

  /** One published message: a batch of consecutive events, delivered in one step. */
  private enqueue(runId: string, group: RunGroup, events: LoggedRunEvent[]): void {
    if (events.length === 0) return;
    // Compared with what is already queued, not delivered: several messages of one run often
    // arrive in one read, and only a real jump in the numbering needs the log.
    if (group.seenId > 0 && events[0].id > group.seenId + 1) {
      group.chain = group.chain.then(() => this.refill(runId, group, events[0].id));
    }
    group.seenId = Math.max(group.seenId, events[events.length - 1].id);
    group.chain = group.chain.then(() => {
      for (const event of events) this.deliver(group, event);
    });
  }

  /** Hands the followers the logged events between the last delivered one and `before`. */
  private async refill(runId: string, group: RunGroup, before: number): Promise<void> {
    try {
      // Page through: a long outage may have missed more than one read's worth (LLM deltas).
      for (;;) {
        const page = await this.opts.log.after(runId, group.lastId, REFILL_PAGE);
        for (const event of page) {
          if (event.id >= before) return;
          this.deliver(group, event);
        }
        if (page.length < REFILL_PAGE) return;
      }
    } catch (err) {
      this.opts.logger.warn({ err, runId }, 'could not read missed run events back from the log');
    }
  }

  private deliver(group: RunGroup, logged: LoggedRunEvent): void {
    if (logged.id <= group.lastId) return;
    group.lastId = logged.id;
    group.seenId = Math.max(group.seenId, logged.id);
    const event = new LiveEvent(logged.id, logged.event, logged.data);
    for (const listener of group.listeners) {
      try {
        listener(event);
      } catch (err) {
        this.opts.logger.warn({ err }, 'a run event follower threw');
      }
    }
  }
}
