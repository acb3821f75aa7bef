/** One server-sent event: its `event` type (`message` when unnamed) and its data lines joined by `\n`. */
export interface SseEvent {
  event: string;
  data: string;
}

/**
 * A server-sent events reader, fed text as it arrives (any split, even inside a line or between
 * a CR and its LF), yielding each event once its blank line has come. It follows the WHATWG
 * parsing rules (CRLF, LF or CR line ends; `:` comments; one space after the colon dropped;
 * several `data:` lines joined by `\n`; `id` and `retry` ignored, as they mean nothing for one
 * completion), so every OpenAI-compatible server's framing reads alike.
 *
 * One addition: llama.cpp's llama-server reports an error inside a stream as a line
 * `error: {json}` (a field the standard ignores); such a block is yielded as an event of type
 * `error`, so the engine can fail with the server's message rather than "the stream ended".
 */
export class SseReader {
  private buffer = '';
  /** The last text fed ended with CR: an LF starting the next one belongs to that line end. */
  private afterCr = false;
  private event = '';
  private data: string[] = [];
  private error: string | null = null;

  /** The events completed by this text. */
  feed(text: string): SseEvent[] {
    if (this.afterCr && text.startsWith('\n')) text = text.slice(1);
    this.afterCr = false;
    this.buffer += text;
    const out: SseEvent[] = [];
    for (;;) {
      const end = this.buffer.search(/[\r\n]/);
      if (end < 0) break;
      const line = this.buffer.slice(0, end);
      let next = end + 1;
      if (this.buffer[end] === '\r') {
        if (next === this.buffer.length) this.afterCr = true;
        else if (this.buffer[next] === '\n') next++;
      }
      this.buffer = this.buffer.slice(next);
      const ev = this.line(line);
      if (ev) out.push(ev);
    }
    return out;
  }

  /** Text after the last line end, which no complete event holds (the stream was cut mid-event). */
  get pending(): boolean {
    return this.buffer !== '' || this.data.length > 0 || this.error !== null;
  }

  private line(line: string): SseEvent | null {
    if (line === '') return this.dispatch();
    if (line.startsWith(':')) return null;
    const colon = line.indexOf(':');
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'data') this.data.push(value);
    else if (field === 'event') this.event = value;
    else if (field === 'error') this.error = value;
    return null;
  }

  private dispatch(): SseEvent | null {
    const { event, data, error } = this;
    this.event = '';
    this.data = [];
    this.error = null;
    if (error !== null && data.length === 0) return { event: 'error', data: error };
    if (data.length === 0) return null;
    return { event: event || 'message', data: data.join('\n') };
  }
}
