import { createHmac, randomBytes } from 'node:crypto';

/** Aliases remembered at most: one per worker attached lately, so a lease costs a map lookup, not an HMAC. */
const REMEMBERED = 10_000;

/**
 * The opaque id a run's attempt history shows for a worker (docs/jobs.md, "Attempts"): a keyed
 * hash (HMAC-SHA256) of its worker id, stable per worker on every instance that shares the key,
 * from which neither the id nor the worker's token can be read back. Without a key (a dispatcher
 * built alone, in tests), one made for this process: stable within it only. Each worker's is
 * computed once and remembered: it is asked for at every lease.
 */
export function workerAliases(key: Buffer = randomBytes(32)): (workerId: string) => string {
  const known = new Map<string, string>();
  return (workerId) => {
    let alias = known.get(workerId);
    if (alias === undefined) {
      alias = `wkr_${createHmac('sha256', key).update(workerId).digest('hex').slice(0, 24)}`;
      if (known.size >= REMEMBERED) known.delete(known.keys().next().value!);
      known.set(workerId, alias);
    }
    return alias;
  };
}
