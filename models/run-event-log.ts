import { RedisKeys } from './redis/keys.js';
import type { RedisClient } from './redis-connection.js';
import { pubsub } from './redis-pubsub.js';
import { redisScripts } from './redis/redis-scripts.js';

/** The event names of docs/api.md "Events". */
export type RunEventName = 'status' | 'progress' | 'log' | 'output' | 'done';

/** One event of a run: its per-run sequence number, its name and its data as one JSON line. */
export interface LoggedRunEvent {
  id: number;
  event: RunEventName;
  /** The data, already serialized (one line of JSON): fan-out writes it as is. */
  data: string;
}

/**
 * A delta a worker numbered (protocol 4): logged only if `seq` is above the highest one logged
 * for the lease, so a delta sent again after a lost answer (a gateway that died, a move to
 * another instance) is not logged twice.
 */
export interface DeltaGuard {
  leaseId: string;
  seq: number;
}

export interface RunEventLogOptions {
  redis: RedisClient;
  prefix: string;
  /** Events kept per run; the oldest go first (approximately: RedisClient trims whole nodes). */
  maxLength: number;
  /** How long a run's events outlive its last event (the run retention). */
  ttlMs: number;
}

/**
 * Per-run event log: a capped Redis stream per run whose entry ids are the event numbers
 * (`<n>-0`), plus a pub/sub channel per run for live delivery. Always in Redis, also when
 * the stores are in MongoDB: it is fan-out plumbing, not a system of record.
 */
export class RunEventLog {
  private readonly keys: RedisKeys;

  constructor(private readonly opts: RunEventLogOptions) {
    this.keys = new RedisKeys(opts.prefix);
  }

  /** The pub/sub channel of a run's live events. */
  channel(runId: string): string {
    return this.keys.runEvents(runId);
  }

  /** The run whose live events `channel` carries, or null for another channel. */
  runIdOf(channel: string): string | null {
    return this.keys.runIdOfEvents(channel);
  }

  private key(runId: string): string {
    return this.keys.runEventLog(runId);
  }

  /** Appends events in order (one appendRunEvents script); resolves with the number of the last one. */
  async append(runId: string, events: Array<{ event: RunEventName; data: unknown; guard?: DeltaGuard }>): Promise<number> {
    const args: Array<string | number> = [pubsub.command(this.opts.redis), this.channel(runId), this.opts.maxLength, this.opts.ttlMs];
    for (const e of events) args.push(e.event, JSON.stringify(e.data), e.guard?.leaseId ?? '', e.guard?.seq ?? '');
    return Number(await redisScripts.run(this.opts.redis, 'appendRunEvents', [this.key(runId), this.keys.runEventSeq(runId), this.keys.runDeltaSeq(runId)], args));
  }

  /** Events numbered after `after`, oldest first, at most `count`. */
  async after(runId: string, after: number, count = 1000): Promise<LoggedRunEvent[]> {
    const rows = (await this.opts.redis.xrange(this.key(runId), `(${after}-0`, '+', 'COUNT', count)) as Array<[string, string[]]>;
    return rows.map(toEvent);
  }

  /**
   * The events after the cursor `cursor` of the run (a webhook's: docs/webhooks.md), at most
   * `count`, the cursor moved past them in the same step; `from` is where the cursor was.
   */
  async claim(runId: string, cursor: string, count: number): Promise<{ from: number; events: LoggedRunEvent[] }> {
    const [from, ...rows] = await redisScripts.run(this.opts.redis, 'claimWebhookEvents', [this.key(runId), this.keys.webhookCursor(runId, cursor)], [count, this.opts.ttlMs]);
    return { from: Number(from), events: rows.map(toEvent) };
  }

  /** The newest event, or null when the run has none (or they have expired). */
  async last(runId: string): Promise<LoggedRunEvent | null> {
    const rows = (await this.opts.redis.xrevrange(this.key(runId), '+', '-', 'COUNT', 1)) as Array<[string, string[]]>;
    return rows[0] ? toEvent(rows[0]) : null;
  }

  /**
   * Parses a published message: one "<id> <event> <data>" line per event, in order. The data
   * is one line of JSON (JSON.stringify escapes newlines), so a newline only ever ends an event.
   */
  static parseMessage(message: string): LoggedRunEvent[] {
    const events: LoggedRunEvent[] = [];
    let at = 0;
    while (at < message.length) {
      let end = message.indexOf('\n', at);
      if (end < 0) end = message.length;
      const a = message.indexOf(' ', at);
      const b = message.indexOf(' ', a + 1);
      events.push({ id: Number(message.slice(at, a)), event: message.slice(a + 1, b) as RunEventName, data: message.slice(b + 1, end) });
      at = end + 1;
    }
    return events;
  }
}

function toEvent([id, fields]: [string, string[]]): LoggedRunEvent {
  let event = '';
  let data = 'null';
  for (let i = 0; i < fields.length; i += 2) {
    if (fields[i] === 'e') event = fields[i + 1];
    else if (fields[i] === 'd') data = fields[i + 1];
  }
  return { id: Number(id.slice(0, id.indexOf('-'))), event: event as RunEventName, data };
}
