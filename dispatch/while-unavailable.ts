import { setTimeout as sleep } from 'node:timers/promises';
import { isDatastoreUnavailable } from '../models/errors.js';

/**
 * Runs `fn` again while the datastore is unavailable (back-off from 50 ms, doubling to 1 s), for
 * at most `forMs` (a lease TTL: past it the locks lapse anyway) and not once `stopping()`.
 */
export async function whileUnavailable<T>(fn: () => Promise<T>, forMs: number, stopping: () => boolean): Promise<T> {
  const deadline = Date.now() + forMs;
  for (let delay = 50; ; delay = Math.min(delay * 2, 1_000)) {
    try {
      return await fn();
    } catch (err) {
      if (!isDatastoreUnavailable(err) || stopping() || Date.now() + delay > deadline) throw err;
      await sleep(delay);
    }
  }
}
