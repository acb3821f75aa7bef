import type { IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';

export interface LingerOptions {
  /** Longest the caller may keep sending after the answer. @defaultValue 30 s */
  maxMs: number;
  /** Close earlier once the caller has sent nothing for this long (checked at this interval, so quiet for up to twice it). @defaultValue 5 s */
  idleMs: number;
}

/**
 * Makes a connection answered with `Connection: close` while its request body is still coming
 * (413 on a chunked body) close gracefully. Node destroys such a socket as soon as the answer
 * is flushed; the caller's next bytes then draw a TCP RST, which throws away the answer still
 * unread in the caller's buffer (python's http.client, requests and most clients read only after
 * writing the whole body) and the caller sees EPIPE instead of the 413. As nginx's
 * lingering_close does: send the answer and our FIN, read and discard whatever the caller
 * still sends, and close when it stops, goes quiet, or takes too long.
 */
export function lingerBeforeClose(req: IncomingMessage, opts: LingerOptions = { maxMs: 30_000, idleMs: 5_000 }): void {
  // The body reader stopped reading at its limit; read on, discarding, so the caller can finish.
  req.resume();
  req.socket.destroySoon = function lingeringDestroySoon(this: Socket) {
    this.end();
    const close = () => {
      clearTimeout(hard);
      clearInterval(idle);
      this.destroy();
    };
    const hard = setTimeout(close, opts.maxMs).unref();
    // Quiet is judged by the byte count, not by a 'data' listener: one would take the socket
    // from http's native parser, and with it any reading the parser had stopped.
    let seen = this.bytesRead;
    const idle = setInterval(() => {
      if (this.bytesRead === seen) close();
      seen = this.bytesRead;
    }, opts.idleMs).unref();
    this.once('end', close);
    this.once('close', close);
    // When the answer came before any of the body was read (a Content-Length over the limit),
    // http's parser has stopped reading the socket; a pause and resume make it read again.
    this.pause();
    this.resume();
  };
}
