import type { Redis } from 'ioredis';
import type { RedisKeys } from '../../../models/redis/keys.js';
import { gateLua, gateVerdict, type GateCheck, type GateVerdict } from '../../../models/redis/gate-lua.js';
import { LuaScript } from '../../../models/redis/lua-script.js';

/**
 * Checked once per authenticated request, in one Redis round trip: whether the key was
 * revoked (on any instance, whatever the local cache says) and the key's rate limit.
 * KEYS: revoked marker, limiter. ARGV: emission interval ms, burst tolerance ms, limiting on (1/0).
 */
const GATE = new LuaScript(`${gateLua(1, 2, 1)}
return { 1, 0, gate_remaining }
`);

export interface RequestGateOptions {
  redis: Redis;
  keys: RedisKeys;
  /** Sustained requests per second per key; 0 turns limiting off. */
  perSecond: number;
  /** Requests allowed at once. */
  burst: number;
}

export type { GateVerdict };

export class RequestGate {
  private readonly interval: number;
  private readonly tolerance: number;

  constructor(private readonly opts: RequestGateOptions) {
    this.interval = opts.perSecond > 0 ? 1000 / opts.perSecond : 0;
    this.tolerance = this.interval * opts.burst;
  }

  get limit(): number {
    return this.opts.burst;
  }

  async admit(lookupId: string): Promise<GateVerdict> {
    const { keys, args } = this.check(lookupId);
    return gateVerdict(await GATE.run<[number, number, number]>(this.opts.redis, keys, args));
  }

  /** The gate's keys and arguments for a key, for a store that runs the gate inside its own script. */
  check(lookupId: string): GateCheck {
    return {
      keys: [this.opts.keys.revokedKey(lookupId), this.opts.keys.rateLimit(`key:${lookupId}`)],
      args: [this.interval, this.tolerance, this.opts.perSecond > 0 ? '1' : '0'],
    };
  }

  /** Marks a key revoked for every instance; kept well past any cache lifetime. */
  async markRevoked(lookupId: string): Promise<void> {
    await this.opts.redis.set(this.opts.keys.revokedKey(lookupId), '1', 'EX', 7 * 86400);
  }
}
