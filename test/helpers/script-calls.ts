import type { TestGateway } from './harness.js';

/**
 * The arguments of every EVALSHA the gateway's request connection sends while `fn` runs: which
 * Redis scripts a request ran, and with which keys.
 */
export async function scriptCalls(gw: TestGateway, fn: () => Promise<void>): Promise<string[][]> {
  const calls: string[][] = [];
  const redis = gw.redis as unknown as { evalsha: (...args: unknown[]) => Promise<unknown> };
  const original = redis.evalsha;
  redis.evalsha = function (this: unknown, ...args: unknown[]) {
    calls.push(args.map(String));
    return original.apply(this, args);
  };
  try {
    await fn();
  } finally {
    redis.evalsha = original;
  }
  return calls;
}

/** The calls that ran the request gate (they name the key's revocation), in order. */
export const gateCalls = (calls: string[][]) => calls.filter((args) => args.some((x) => x.includes(':revoked:')));
