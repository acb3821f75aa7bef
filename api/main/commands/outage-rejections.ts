import type { Logger } from 'pino';
import { isDatastoreUnavailable } from '../../../models/errors.js';

/**
 * The gateway process's `unhandledRejection` listener. A Redis or MongoDB command that nobody
 * awaited (a best-effort write, a command a library sent for itself) fails when the datastore
 * goes away, and Node would end the process for it: a gateway that lives through an outage
 * would die of a promise it did not need. Such a failure is logged and the process goes on,
 * as it does for the awaited commands of the same outage. Any other unhandled rejection is a
 * bug, and still ends the process (thrown from the listener, it is an uncaught exception).
 */
export function tolerateOutageRejections(log: Pick<Logger, 'warn'>): (reason: unknown) => void {
  return (reason) => {
    if (!isDatastoreUnavailable(reason)) throw reason;
    log.warn({ err: reason }, 'a datastore command nobody awaited failed during an outage; carrying on');
  };
}
