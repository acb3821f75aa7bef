import type { TestGateway } from './harness.js';

type Spied = Record<'eval' | 'evalsha', (...args: unknown[]) => unknown>;

/**
 * The arguments of every script call the gateway sends while `fn` runs: each EVALSHA of its
 * request connection, and each EVAL or EVALSHA of its queues' connection (where a submission's
 * create goes out ahead of its job's add, queues/create-and-enqueue.ts). Which Redis scripts a
 * request ran, and with which keys.
 */
export async function scriptCalls(gw: TestGateway, fn: () => Promise<void>): Promise<string[][]> {
  const calls: string[][] = [];
  const record = (target: Spied, name: 'eval' | 'evalsha') => {
    const original = target[name];
    target[name] = function (this: unknown, ...args: unknown[]) {
      calls.push(args.map(String));
      return original.apply(this, args);
    };
    return () => {
      target[name] = original;
    };
  };
  // BullMQ's own scripts on the queues connection go by the commands it defines, not these.
  const queues = gw.gateway.core.queueConnection as unknown as Spied;
  const restore = [record(gw.redis as unknown as Spied, 'evalsha'), record(queues, 'evalsha'), record(queues, 'eval')];
  try {
    await fn();
  } finally {
    for (const undo of restore) undo();
  }
  return calls;
}

/** The calls that ran the request gate (they name the key's revocation marker: `<prefix>:revoked:<key>`, or `...:key:{<key>}:revoked` spread), in order. */
export const gateCalls = (calls: string[][]) => calls.filter((args) => args.some((x) => /:revoked(:|$)/.test(x)));
