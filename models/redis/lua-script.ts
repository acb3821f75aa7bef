import { createHash } from 'node:crypto';
import type { Redis } from 'ioredis';

/**
 * A Lua script called by its SHA (EVALSHA), so the hot path does not ship the script text
 * on every call; falls back to EVAL once when Redis has not seen it (after a restart or
 * SCRIPT FLUSH), which also loads it.
 */
export class LuaScript {
  private readonly sha: string;

  constructor(private readonly source: string) {
    this.sha = createHash('sha1').update(source).digest('hex');
  }

  async run<T = unknown>(redis: Redis, keys: string[], args: Array<string | number>): Promise<T> {
    try {
      return (await redis.evalsha(this.sha, keys.length, ...keys, ...args)) as T;
    } catch (err) {
      if (!(err instanceof Error) || !err.message.startsWith('NOSCRIPT')) throw err;
      return (await redis.eval(this.source, keys.length, ...keys, ...args)) as T;
    }
  }
}
