import type { IncomingHttpHeaders, IncomingMessage } from 'node:http';
import { Readable } from 'node:stream';
import { OutboundError } from './outbound-error.js';

/** An answer whose body is read as it arrives ({@link SsrfGuard.stream}). */
export interface OutboundStream {
  status: number;
  headers: IncomingHttpHeaders;
  /**
   * The body, within the limits of the call. It fails with an OutboundError: `response_too_large`
   * past the byte limit, `timeout` when it pauses longer than the idle timeout or has not ended by
   * the deadline, `connect_failed` when the connection ends before the body does, `aborted` on the
   * call's signal. Destroy it to stop early: the connection is then closed, never reused.
   */
  body: Readable;
}

export interface BodyLimits {
  maxBytes: number;
  /** Longest wait for the next bytes while the reader wants some. */
  idleTimeoutMs: number;
  /** The whole call's time limit, and when (Date.now()) it runs out. */
  totalTimeoutMs: number;
  deadline: number;
  signal?: AbortSignal;
}

/**
 * `res` as a Readable that enforces `limits` while it streams.
 *
 * @remarks
 * The idle timer runs only while the reader wants bytes (the wrapper pulls from `res` on demand and
 * pauses it when its own buffer is full), so a slow reader, such as a disk write, never looks like
 * a stalled sender; the deadline runs whatever the reader does. Bytes past the limit are never
 * handed on: the body fails at the chunk that passes it.
 */
export function limitedBody(res: IncomingMessage, limits: BodyLimits): Readable {
  let size = 0;
  let idle: NodeJS.Timeout | undefined;
  const fail = (err: OutboundError) => body.destroy(err);
  const onAbort = () => fail(new OutboundError('aborted', 'the call was aborted'));
  const stalled = () => fail(new OutboundError('timeout', `the body paused for more than ${limits.idleTimeoutMs} ms`));
  const waitForBytes = () => {
    clearTimeout(idle);
    idle = setTimeout(stalled, limits.idleTimeoutMs);
  };
  const total = setTimeout(
    () => fail(new OutboundError('timeout', `the body did not end within ${limits.totalTimeoutMs} ms`)),
    Math.max(0, limits.deadline - Date.now()),
  );
  const body = new Readable({
    read() {
      waitForBytes();
      res.resume();
    },
    destroy(err, callback) {
      clearTimeout(idle);
      clearTimeout(total);
      limits.signal?.removeEventListener('abort', onAbort);
      // Closes the connection unless the body was read to its end (then the agent keeps it).
      res.destroy();
      callback(err);
    },
  });
  // A failure between two reads (a timer, a reset) must not crash the process when nobody listens
  // at that moment; the reader still gets the error from its next read or its iterator.
  body.on('error', () => {});

  res.on('data', (chunk: Buffer) => {
    clearTimeout(idle);
    size += chunk.length;
    if (size > limits.maxBytes) return fail(new OutboundError('response_too_large', `the response is larger than ${limits.maxBytes} bytes`));
    if (body.push(chunk)) waitForBytes();
    else res.pause();
  });
  // Attaching 'data' set `res` flowing: nothing flows until the reader asks.
  res.pause();
  res.on('end', () => {
    clearTimeout(idle);
    clearTimeout(total);
    limits.signal?.removeEventListener('abort', onAbort);
    body.push(null);
  });
  res.on('error', (err) => fail(new OutboundError('connect_failed', `the connection failed during the body: ${err.message}`, { cause: err })));
  res.on('close', () => {
    if (!res.complete) fail(new OutboundError('connect_failed', 'the connection closed before the response was complete'));
  });
  if (limits.signal?.aborted) onAbort();
  else limits.signal?.addEventListener('abort', onAbort, { once: true });
  return body;
}
