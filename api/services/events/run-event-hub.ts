import type { RedisClient } from '../../../models/redis-connection.js';
import { pubsub } from '../../../models/redis-pubsub.js';
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
  /**
   * Before the first live event: the lowest log position its followers read up to themselves
   * (`seen`), where a read-back of missed messages starts instead of the log's beginning.
   */
  floor: number;
  /**
   * Set at each reconnect: the subscriber may have missed messages the hub cannot number (a
   * follower that replayed the log itself leaves `seenId` at 0), so the first message after it
   * reads the log back first. Set again while a read-back fails.
   */
  unsure: boolean;
  /** Delivery is serialized per run, so a gap refill from the log cannot reorder events. */
  chain: Promise<void>;
  subscribed: Promise<unknown>;
}

export interface RunEventHubOptions {
  /** The process's one subscriber connection (shared with the dispatcher's channels). */
  subscriber: RedisClient;
  log: RunEventLog;
  logger: Logger;
}

/**
 * Live fan-out of run events inside one gateway process: one Redis subscription per run that
 * has local followers (SSE streams, WebSocket subscriptions, `Prefer: wait`), however many
 * followers there are, on the process's one subscriber connection. Each event is parsed
 * and formatted once and handed to every follower.
 *
 * The runs followed and let go in one event-loop turn are subscribed with one SUBSCRIBE and
 * unsubscribed with one UNSUBSCRIBE at its end, each naming many channels (on a Redis Cluster
 * SSUBSCRIBE and SUNSUBSCRIBE, one per slot: models/redis-pubsub.ts): a command per run
 * was 2.5% of the gateway's thread in `bench stream` (docs/benchmarks.md, stream). What is
 * sent is the difference between the runs followed and the channels the connection has, so a
 * run let go and followed again in one turn sends nothing and stays subscribed.
 */
export class RunEventHub {
  private readonly runs = new Map<string, RunGroup>();
  /**
   * The runs whose channel the connection is subscribed to, counting the commands already
   * sent: each with its SUBSCRIBE's reply, which a follower of the run awaits.
   */
  private readonly channels = new Map<string, Promise<unknown>>();
  /** Runs followed or let go this turn, whose channel may need a command at its end. */
  private readonly changed = new Set<string>();
  /** The end of this turn's SUBSCRIBE, awaited by the runs it will subscribe; null when none is due. */
  private due: { reply: Promise<unknown>; send: (reply: Promise<unknown>) => void } | null = null;
  private flushScheduled = false;
  private readonly onMessage = (channel: string, message: string) => {
    // A run's channel is not one prefix and its id: on a cluster it carries the run's group.
    const runId = this.opts.log.runIdOf(channel);
    const group = runId === null ? undefined : this.runs.get(runId);
    if (!group) return;
    this.enqueue(runId!, group, RunEventLog.parseMessage(message));
  };
  // Messages published while the subscriber was reconnecting are lost to pub/sub: read them
  // back from the log for every run still followed here (at `ready` on one server; on a
  // cluster when ioredis has made its sharded subscriptions again: pubsub.onResubscribed).
  private readonly onReady = () => {
    for (const [runId, group] of this.runs) {
      group.unsure = true;
      group.chain = group.chain.then(() => this.refill(runId, group, Number.MAX_SAFE_INTEGER));
    }
  };

  private listening: Array<() => void> = [];

  constructor(private readonly opts: RunEventHubOptions) {}

  start(): void {
    const { subscriber } = this.opts;
    this.listening = [pubsub.onMessage(subscriber, this.onMessage), pubsub.onResubscribed(subscriber, this.onReady)];
  }

  stop(): void {
    for (const off of this.listening) off();
    this.listening = [];
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
      group = { listeners: new Set(), lastId: 0, seenId: 0, floor: 0, unsure: false, chain: Promise.resolve(), subscribed: this.channels.get(runId) ?? this.subscribeThisTurn(runId) };
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

  /**
   * A follower of `runId` read its log up to event `id` itself (a fresh connection's snapshot, a
   * resumed one's replay). Until the first live event reaches the run's followers here, that is
   * what numbers a gap: a first live event past `id + 1` means messages were lost, and they are
   * read back from the log. Needed where the read-back at a resubscription comes too early or
   * not at all (a cluster's SSUBSCRIBEs are sent again without waiting for their replies, and
   * before sharded pub/sub its subscriptions moved node with no event). Once events flow live,
   * their own numbering does it.
   */
  seen(runId: string, id: number): void {
    const group = this.runs.get(runId);
    if (!group || group.lastId > 0 || id <= 0) return;
    group.floor = group.floor === 0 ? id : Math.min(group.floor, id);
    group.seenId = Math.max(group.seenId, id);
  }

  private remove(runId: string, group: RunGroup, listener: RunEventListener): void {
    group.listeners.delete(listener);
    if (group.listeners.size > 0 || this.runs.get(runId) !== group) return;
    this.runs.delete(runId);
    this.changed.add(runId);
    this.flushAtEndOfTurn();
  }

  /** The reply of the SUBSCRIBE that will name `runId`'s channel at the end of this turn. */
  private subscribeThisTurn(runId: string): Promise<unknown> {
    this.changed.add(runId);
    this.flushAtEndOfTurn();
    if (!this.due) {
      let send!: (reply: Promise<unknown>) => void;
      const reply = new Promise<unknown>((resolve) => (send = resolve));
      this.due = { reply, send };
    }
    return this.due.reply;
  }

  private flushAtEndOfTurn(): void {
    if (this.flushScheduled) return;
    this.flushScheduled = true;
    setImmediate(() => this.flush());
  }

  /** Sends what the turn changed: one SUBSCRIBE for the runs newly followed, one UNSUBSCRIBE for those let go. */
  private flush(): void {
    this.flushScheduled = false;
    const subscribe: string[] = [];
    const unsubscribe: string[] = [];
    for (const runId of this.changed) {
      const followed = this.runs.has(runId);
      if (followed && !this.channels.has(runId)) subscribe.push(runId);
      else if (!followed && this.channels.has(runId)) unsubscribe.push(runId);
    }
    this.changed.clear();
    const due = this.due;
    this.due = null;
    const { subscriber, log } = this.opts;
    if (subscribe.length > 0) {
      const reply = pubsub.subscribe(subscriber, subscribe.map((runId) => log.channel(runId)));
      for (const runId of subscribe) this.channels.set(runId, reply);
      // A refused SUBSCRIBE subscribed nothing: the next follower of these runs tries again.
      reply.catch(() => {
        for (const runId of subscribe) if (this.channels.get(runId) === reply) this.channels.delete(runId);
      });
      due?.send(reply);
    } else {
      due?.send(Promise.resolve());
    }
    if (unsubscribe.length > 0) {
      for (const runId of unsubscribe) this.channels.delete(runId);
      pubsub.unsubscribe(subscriber, unsubscribe.map((runId) => log.channel(runId))).catch(() => {});
    }
  }

  /** One published message: a batch of consecutive events, delivered in one step. */
  private enqueue(runId: string, group: RunGroup, events: LoggedRunEvent[]): void {
    if (events.length === 0) return;
    // Compared with what is already queued, not delivered: several messages of one run often
    // arrive in one read, and only a real jump in the numbering needs the log.
    // After a reconnect the first message reads back first, whatever the numbering says: the
    // read-back at a resubscription may have failed, or run before the missed events were logged.
    if (group.unsure || (group.seenId > 0 && events[0].id > group.seenId + 1)) {
      group.unsure = false;
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
        const page = await this.opts.log.after(runId, group.lastId || group.floor, REFILL_PAGE);
        for (const event of page) {
          if (event.id >= before) return;
          this.deliver(group, event);
        }
        if (page.length < REFILL_PAGE) return;
      }
    } catch (err) {
      group.unsure = true;
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
