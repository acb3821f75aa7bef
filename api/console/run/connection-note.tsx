import { errorMessage } from '../lib/gateway.js';
import type { Connection } from './run-follower.js';

/** The live stream's state, so a user knows whether what they see is still coming in. */
export function ConnectionNote({ connection, retryInMs, error }: { connection: Connection; retryInMs: number | undefined; error: unknown }) {
  let text: string;
  let cls = 'connection';
  switch (connection) {
    case 'connecting':
      text = 'Connecting to the live events…';
      break;
    case 'live':
      text = 'Live: updates appear as they happen.';
      cls += ' connection-live';
      break;
    case 'reconnecting':
      text = `Connection lost: reconnecting…${retryInMs ? ` (next try in ${Math.ceil(retryInMs / 1000)} s)` : ''} Nothing is lost: the page picks up after the last event it showed.`;
      cls += ' connection-reconnecting';
      break;
    case 'ended':
      text = 'The run is over: this is its whole history.';
      break;
    default:
      text = `The live events stopped: ${errorMessage(error)}`;
      cls += ' connection-failed';
  }
  return (
    <p class={cls} role="status" data-connection={connection}>
      {text}
    </p>
  );
}
