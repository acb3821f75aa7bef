import { RedisKeys } from './redis/keys.js';
import type { Redis } from 'ioredis';
import { LuaScript } from './redis/lua-script.js';

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

/**
 * KEYS: the run's stream, its counter, its per-lease delta numbers. ARGV: channel, max length,
 * ttl ms, then (event, data, lease, seq) quadruples (lease and seq empty for an unnumbered
 * event). A numbered event at or below its lease's stored seq is skipped; the check and the
 * append are one atomic step, whichever instance the worker resends through. Numbers the events after the last number used, appends them and publishes them as ONE
 * message of "<id> <event> <data>" lines, in one atomic step: the live order is the log order,
 * and no two events of a run ever share a number, whichever instance appended them. A batch
 * costs one call and one PUBLISH however many events it holds (LLM deltas come in bursts).
 * The counter spares an XREVRANGE per call; the stream's top is read only when the counter is
 * missing (a log older than it) or behind (an instance of the previous version appended
 * meanwhile, which its XADD refuses).
 * Returns the last number used.
 */
const APPEND = new LuaScript(`
local function top()
  local t = redis.call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', 1)
  if t[1] then return tonumber(string.match(t[1][1], '^(%d+)')) end
  return 0
end
local seq = tonumber(redis.call('GET', KEYS[2]) or '')
if not seq then seq = top() end
local lines = {}
local guarded = false
for i = 4, #ARGV, 4 do
  local skip = false
  if ARGV[i + 2] ~= '' then
    local d = tonumber(ARGV[i + 3])
    if d <= (tonumber(redis.call('HGET', KEYS[3], ARGV[i + 2]) or '0')) then
      skip = true
    else
      redis.call('HSET', KEYS[3], ARGV[i + 2], d)
      guarded = true
    end
  end
  if not skip then
    seq = seq + 1
    local r = redis.pcall('XADD', KEYS[1], 'MAXLEN', '~', ARGV[2], seq .. '-0', 'e', ARGV[i], 'd', ARGV[i + 1])
    if type(r) == 'table' and r.err then
      seq = top() + 1
      redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[2], seq .. '-0', 'e', ARGV[i], 'd', ARGV[i + 1])
    end
    lines[#lines + 1] = seq .. ' ' .. ARGV[i] .. ' ' .. ARGV[i + 1]
  end
end
if guarded then redis.call('PEXPIRE', KEYS[3], ARGV[3]) end
if #lines == 0 then return seq end
redis.call('PUBLISH', ARGV[1], table.concat(lines, '\\n'))
redis.call('SET', KEYS[2], seq, 'PX', ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return seq
`);

export interface RunEventLogOptions {
  redis: Redis;
  prefix: string;
  /** Events kept per run; the oldest go first (approximately: Redis trims whole nodes). */
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

  private key(runId: string): string {
    return this.keys.runEventLog(runId);
  }

  /** Appends events in order; resolves with the number of the last one. */
  async append(runId: string, events: Array<{ event: RunEventName; data: unknown; guard?: DeltaGuard }>): Promise<number> {
    const args: Array<string | number> = [this.channel(runId), this.opts.maxLength, this.opts.ttlMs];
    for (const e of events) args.push(e.event, JSON.stringify(e.data), e.guard?.leaseId ?? '', e.guard?.seq ?? '');
    return Number(await APPEND.run(this.opts.redis, [this.key(runId), this.keys.runEventSeq(runId), this.keys.runDeltaSeq(runId)], args));
  }

  /** Events numbered after `after`, oldest first, at most `count`. */
  async after(runId: string, after: number, count = 1000): Promise<LoggedRunEvent[]> {
    const rows = (await this.opts.redis.xrange(this.key(runId), `(${after}-0`, '+', 'COUNT', count)) as Array<[string, string[]]>;
    return rows.map(toEvent);
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
