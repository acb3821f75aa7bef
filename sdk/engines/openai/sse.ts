import { StringDecoder } from 'node:string_decoder';

/** One server-sent event: its `event` type (`message` when unnamed) and its data lines joined by `\n`. */
export interface SseEvent {
  event: string;
  data: string;
}

const LF = 10;
const COLON = 58;
const SPACE = 32;

/**
 * A server-sent events reader, fed bytes or text as they arrive (any split, even inside a UTF-8
 * character, inside a line or between a CR and its LF), yielding each event once its blank line
 * has come. It follows the WHATWG parsing rules (UTF-8 with a leading byte order mark dropped;
 * CRLF, LF or CR line ends; `:` comments; one space after the colon dropped; several `data:`
 * lines joined by `\n`; `id` and `retry` ignored, as they mean nothing for one completion), so
 * every OpenAI-compatible server's framing reads alike.
 *
 * One addition: llama.cpp's llama-server reports an error inside a stream as a line
 * `error: {json}` (a field the standard ignores); such a block is yielded as an event of type
 * `error`, so the engine can fail with the server's message rather than "the stream ended".
 *
 * It runs once per token of every streamed completion, so it walks the text by index instead of
 * cutting it line by line: Node's StringDecoder decodes a read (TextDecoder's streaming mode,
 * which gives the same text, costs ten times as much on Node 20), and a data line is one slice.
 */
export class SseReader {
  private readonly decoder = new StringDecoder('utf8');
  /** No text has been decoded yet: a byte order mark at the start is dropped. */
  private atStart = true;
  /** The text after the last line end, waiting for the rest of its line. */
  private buffer = '';
  /** The last text fed ended with CR: an LF starting the next one belongs to that line end. */
  private afterCr = false;
  private event = '';
  /** The data lines so far, joined by `\n`; null before the first. */
  private data: string | null = null;
  private error: string | null = null;

  /** The events completed by these bytes (UTF-8; a character may be split between two calls). */
  feedBytes(bytes: Uint8Array): SseEvent[] {
    let text = this.decoder.write(bytes as Buffer);
    if (this.atStart && text !== '') {
      this.atStart = false;
      if (text.charCodeAt(0) === 0xfeff) text = text.slice(1);
    }
    return this.feed(text);
  }

  /** The events completed by this text. */
  feed(text: string): SseEvent[] {
    if (this.afterCr && text !== '') {
      this.afterCr = false;
      if (text.charCodeAt(0) === LF) text = text.slice(1);
    }
    const buf = this.buffer === '' ? text : this.buffer + text;
    const out: SseEvent[] = [];
    let pos = 0;
    // The next CR and LF at or after `pos`, each looked up again only once passed (-1: none left).
    let cr = buf.indexOf('\r');
    let lf = buf.indexOf('\n');
    for (;;) {
      if (cr !== -1 && cr < pos) cr = buf.indexOf('\r', pos);
      if (lf !== -1 && lf < pos) lf = buf.indexOf('\n', pos);
      const end = cr === -1 ? lf : lf === -1 ? cr : Math.min(cr, lf);
      if (end === -1) break;
      let next = end + 1;
      if (end === cr) {
        if (next === buf.length) this.afterCr = true;
        else if (buf.charCodeAt(next) === LF) next++;
      }
      const ev = this.line(buf, pos, end);
      if (ev) out.push(ev);
      pos = next;
    }
    this.buffer = pos === 0 ? buf : buf.slice(pos);
    return out;
  }

  /** Text after the last line end, which no complete event holds (the stream was cut mid-event). */
  get pending(): boolean {
    return this.buffer !== '' || this.data !== null || this.error !== null;
  }

  /** The line `buf[start, end)`. */
  private line(buf: string, start: number, end: number): SseEvent | null {
    if (start === end) return this.dispatch();
    if (buf.charCodeAt(start) === COLON) return null;
    let colon = buf.indexOf(':', start);
    if (colon >= end) colon = -1;
    // The field is compared in place: only the value is cut out.
    const fieldLength = (colon < 0 ? end : colon) - start;
    let from = colon < 0 ? end : colon + 1;
    if (from < end && buf.charCodeAt(from) === SPACE) from++;
    if (fieldLength === 4 && buf.startsWith('data', start)) {
      const value = buf.slice(from, end);
      this.data = this.data === null ? value : `${this.data}\n${value}`;
    } else if (fieldLength === 5 && buf.startsWith('event', start)) this.event = buf.slice(from, end);
    else if (fieldLength === 5 && buf.startsWith('error', start)) this.error = buf.slice(from, end);
    return null;
  }

  private dispatch(): SseEvent | null {
    const { event, data, error } = this;
    this.event = '';
    this.data = null;
    this.error = null;
    if (error !== null && data === null) return { event: 'error', data: error };
    if (data === null) return null;
    return { event: event || 'message', data };
  }
}
