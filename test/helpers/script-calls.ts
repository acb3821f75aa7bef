import type { TestGateway } from './harness.js';

type Spied = Record<'eval' | 'evalsha', (...args: unknown[]) => unknown>;

/**
 * The arguments of every script call the gateway sends while `fn` runs: each EVALSHA of its
 * request connection, and each EVAL or EVALSHA in a pipeline of its queues' connection (where a
 * submission's create goes out with its job's add, queues/create-and-enqueue.ts). Which Redis
 * scripts a request ran, and with which keys.
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
  const restore = [record(gw.redis as unknown as Spied, 'evalsha')];
  // BullMQ's pipelines are ioredis's, built by the raw client's `pipeline()` (bullmq's ioredis-client.js).
  const queues = gw.gateway.core.queueConnection as unknown as { pipeline: (...args: unknown[]) => Spied };
  const pipeline = queues.pipeline;
  queues.pipeline = function (this: unknown, ...args: unknown[]) {
    const built = pipeline.apply(this, args);
    record(built, 'eval');
    record(built, 'evalsha');
    return built;
  };
  restore.push(() => {
    queues.pipeline = pipeline;
  });
  try {
    await fn();
  } finally {
    for (const undo of restore) undo();
  }
  return calls;
}

/** The calls that ran the request gate (they name the key's revocation), in order. */
export const gateCalls = (calls: string[][]) => calls.filter((args) => args.some((x) => x.includes(':revoked:')));
