import type { Socket } from 'node:net';
import type { WebSocket } from 'ws';

/**
 * A sender of JSON frames on `ws` whose frames of one event-loop turn (the acks of a batch of a
 * worker's outputs, a lease) go out in one write: the socket is corked at the first and uncorked
 * once the turn's promise callbacks have run, as node:http does with responses. One syscall per
 * frame was a fifth of the gateway's socket writes in the stream benchmark. Frames for a socket
 * that is no longer open are dropped.
 */
export function turnSender<F>(ws: WebSocket): (frame: F) => void {
  const raw = (ws as unknown as { _socket?: Socket })._socket;
  let corked = false;
  return (frame: F) => {
    if (ws.readyState !== ws.OPEN) return;
    if (raw && !corked) {
      corked = true;
      raw.cork();
      process.nextTick(() => {
        corked = false;
        raw.uncork();
      });
    }
    ws.send(JSON.stringify(frame));
  };
}
