import { createHmac, randomBytes } from 'node:crypto';

/**
 * The opaque id a run's attempt history shows for a worker (docs/jobs.md, "Attempts"): a keyed
 * hash (HMAC-SHA256) of its worker id, stable per worker on every instance that shares the key,
 * from which neither the id nor the worker's token can be read back. Without a key (a dispatcher
 * built alone, in tests), one made for this process: stable within it only.
 */
export function workerAliases(key: Buffer = randomBytes(32)): (workerId: string) => string {
  return (workerId) => `wkr_${createHmac('sha256', key).update(workerId).digest('hex').slice(0, 24)}`;
}
