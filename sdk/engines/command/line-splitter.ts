import { StringDecoder } from 'node:string_decoder';

/**
 * Cuts a byte stream (a child's stdout or stderr) into lines while holding at most `maxLine`
 * characters of an unfinished line: a longer line is handed on cut to `maxLine` as soon as it
 * gets there, flagged `truncated`, and the rest of it is skipped up to its newline. So a program
 * that writes gigabytes without a newline costs the worker one line's worth of memory.
 */
export class LineSplitter {
  private readonly decoder = new StringDecoder('utf8');
  private pending = '';
  /** Skipping the rest of a line already handed on cut. */
  private skipping = false;
  /** The most characters ever held at once, for the run's summary (and the tests). */
  maxHeld = 0;

  constructor(
    private readonly maxLine: number,
    private readonly onLine: (line: string, truncated: boolean) => void,
  ) {}

  write(chunk: Buffer): void {
    this.take(this.decoder.write(chunk));
  }

  /** The stream ended: an unfinished last line still counts. */
  end(): void {
    this.take(this.decoder.end());
    if (!this.skipping && this.pending !== '') this.emit(this.pending, false);
    this.pending = '';
    this.skipping = false;
  }

  private take(text: string): void {
    let start = 0;
    while (start < text.length) {
      const nl = text.indexOf('\n', start);
      const end = nl === -1 ? text.length : nl;
      if (!this.skipping) {
        const room = this.maxLine - this.pending.length;
        if (end - start > room) {
          this.emit(this.pending + text.slice(start, start + room), true);
          this.pending = '';
          this.skipping = true;
        } else {
          this.pending += text.slice(start, end);
          this.maxHeld = Math.max(this.maxHeld, this.pending.length);
        }
      }
      if (nl === -1) break;
      if (!this.skipping) this.emit(this.pending, false);
      this.pending = '';
      this.skipping = false;
      start = nl + 1;
    }
  }

  private emit(line: string, truncated: boolean): void {
    this.onLine(line.endsWith('\r') && !truncated ? line.slice(0, -1) : line, truncated);
  }
}
