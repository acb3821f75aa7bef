/**
 * Runs `fn` with the client's `eval` and `evalsha` spied on until it settles: which of them
 * carried scripts meanwhile, in order, and what `fn` gave. Tests run one at a time, so nothing
 * else sends a script on the client meanwhile.
 */
export async function scriptCommandsDuring<T>(client: object, fn: () => Promise<T>): Promise<{ used: string[]; result: T }> {
  const used: string[] = [];
  const spied = client as Record<'eval' | 'evalsha', (...args: unknown[]) => Promise<unknown>>;
  const originals = { eval: spied.eval, evalsha: spied.evalsha };
  for (const name of ['eval', 'evalsha'] as const) {
    spied[name] = function (this: unknown, ...args: unknown[]) {
      used.push(name);
      return originals[name].apply(this, args);
    };
  }
  try {
    return { used, result: await fn() };
  } finally {
    Object.assign(spied, originals);
  }
}
