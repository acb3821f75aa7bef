import { fairRank } from '../models/fair-share.js';
import type { GateVerdict } from '../models/types.js';

export interface CreateForecastOptions {
  /** In-flight runs per fair-share rank of an account of weight 1 (FAIR_SHARE_STEP), as the create script counts them. */
  step: number;
  /** How long what a reply said is trusted. @defaultValue 1000 */
  ttlMs?: number;
  /** Accounts (and API keys) remembered at most; the least recently answered go first. @defaultValue 10000 */
  max?: number;
  /** @defaultValue Date.now */
  now?: () => number;
}

interface AccountForecast {
  /** The account's runs of the kind in flight as the last create's reply here said, and when. */
  inFlight: number;
  /** The account's share of a round (step × weight) as that reply said; unknown: the step (weight 1). */
  share: number;
  seenAt: number;
  /** Creates of the account's kind sent from here and not answered yet: each adds one when it runs. */
  pending: number;
}

/** Forecasts are per account and kind: the rank counts the account's runs of the job's kind. */
const forecastKey = (accountId: string, kind: string): string => `${accountId} ${kind}`;

/**
 * What this instance expects of an account's next create, from the replies of the creates it
 * sent. A submission's job goes into its queue in the same round trip as its create
 * (create-and-enqueue.ts), so before the create has said which priority the run gets: its
 * class's band plus its fair-share rank, `floor(of its kind in flight / (step × weight))`
 * (models/fair-share.ts). The guess takes the account's runs of the kind in flight and its share
 * from the last reply here (trusted for `ttlMs`; unknown is 0 runs, weight 1), less its runs
 * finished here since, plus the creates sent since, which Redis runs in the order they were sent. A wrong guess costs one more round trip (the job's priority changed),
 * never a wrong record.
 *
 * It also says when a create is likely to be refused (its account refused within `ttlMs`, its
 * key rate-limited or revoked), so that one is sent alone: a refused create's job would have to
 * be added and removed again, three writes where one refusal does.
 */
export class CreateForecast {
  private readonly accounts = new Map<string, AccountForecast>();
  /** When a create of an account was last refused here (credits, account gone). */
  private readonly refusals = new Map<string, number>();
  /** API keys whose gate refused, with when it may admit them again (ms). */
  private readonly keys = new Map<string, number>();
  private readonly ttlMs: number;
  private readonly max: number;
  private readonly now: () => number;

  constructor(private readonly opts: CreateForecastOptions) {
    this.ttlMs = opts.ttlMs ?? 1000;
    this.max = opts.max ?? 10_000;
    this.now = opts.now ?? Date.now;
  }

  /** The priority a create of the account's job of `kind` sent now will most likely be given; it counts as sent until `answered`. */
  priority(accountId: string, kind: string, base: number): number {
    const at = this.now();
    let entry = this.accounts.get(forecastKey(accountId, kind));
    if (!entry) {
      entry = { inFlight: 0, share: this.opts.step, seenAt: 0, pending: 0 };
      remember(this.accounts, forecastKey(accountId, kind), entry, this.max);
    }
    const fresh = at - entry.seenAt <= this.ttlMs;
    const rank = fairRank((fresh ? entry.inFlight : 0) + entry.pending, fresh ? entry.share : this.opts.step, 1);
    entry.pending++;
    return base + rank;
  }

  /**
   * A create sent after `priority` was answered; `inFlight` is the account's runs of the kind in
   * flight its reply gave (it created the run), `share` its step × weight.
   */
  answered(accountId: string, kind: string, inFlight?: number, share?: number): void {
    const entry = this.accounts.get(forecastKey(accountId, kind));
    if (!entry) return;
    entry.pending = Math.max(0, entry.pending - 1);
    if (inFlight === undefined) return;
    entry.inFlight = inFlight;
    if (share !== undefined && share > 0) entry.share = share;
    entry.seenAt = this.now();
    this.refusals.delete(accountId);
    remember(this.accounts, forecastKey(accountId, kind), entry, this.max);
  }

  /**
   * A run of the account (of `kind`) became terminal through this instance (its runs in flight one fewer):
   * without it the guess would lag each completion until the next reply, and a busy account
   * near a step's edge is guessed wrong about half the time (bench cycle, docs/benchmarks.md).
   */
  finished(accountId: string, kind: string): void {
    const entry = this.accounts.get(forecastKey(accountId, kind));
    if (entry && this.now() - entry.seenAt <= this.ttlMs) entry.inFlight = Math.max(0, entry.inFlight - 1);
  }

  /** The account's create was refused (its credits, or the account gone). */
  refused(accountId: string): void {
    remember(this.refusals, accountId, this.now(), this.max);
  }

  /** The key's gate refused: limited until its retry-after, revoked for good (remembered for a minute). */
  gateRefused(lookupId: string, verdict: Exclude<GateVerdict, { outcome: 'allowed' }>): void {
    const wait = verdict.outcome === 'limited' ? verdict.retryAfterMs : 60_000;
    remember(this.keys, lookupId, this.now() + wait, this.max);
  }

  /** False when this instance was told within `ttlMs` that such a create is refused. */
  likelyAdmitted(accountId: string, lookupId?: string): boolean {
    const at = this.now();
    const refusedAt = this.refusals.get(accountId) ?? 0;
    if (refusedAt > 0 && at - refusedAt <= this.ttlMs) return false;
    if (lookupId === undefined) return true;
    const until = this.keys.get(lookupId);
    if (until === undefined) return true;
    if (until > at) return false;
    this.keys.delete(lookupId);
    return true;
  }
}

/** Sets `key` as the newest entry of `map`, dropping the oldest when it holds `max`. */
function remember<V>(map: Map<string, V>, key: string, value: V, max: number): void {
  map.delete(key);
  if (map.size >= max) map.delete(map.keys().next().value!);
  map.set(key, value);
}
