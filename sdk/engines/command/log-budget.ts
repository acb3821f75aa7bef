/**
 * How many log lines of a command reach the job's log: each is a frame to the gateway and an
 * entry of the run's log, so a program printing a million lines must not send a million. A
 * token bucket: `burst` lines at once, then `perSecond`; the lines over it are dropped and
 * counted, and the count is logged when lines flow again and at the end.
 */
export class LogBudget {
  private tokens: number;
  private last: number;
  forwarded = 0;
  dropped = 0;
  private droppedUnsaid = 0;

  constructor(
    private readonly perSecond: number,
    private readonly burst: number,
    private readonly send: (line: string) => void,
    private readonly now: () => number = Date.now,
  ) {
    this.tokens = burst;
    this.last = now();
  }

  log(line: string): void {
    const t = this.now();
    this.tokens = Math.min(this.burst, this.tokens + ((t - this.last) / 1000) * this.perSecond);
    this.last = t;
    if (this.tokens < 1 + (this.droppedUnsaid ? 1 : 0)) {
      this.dropped++;
      this.droppedUnsaid++;
      return;
    }
    this.flush();
    this.tokens--;
    this.forwarded++;
    this.send(line);
  }

  /** Says how many lines were dropped since it last said so. */
  flush(): void {
    if (!this.droppedUnsaid) return;
    this.send(`(${this.droppedUnsaid} lines dropped: more than ${this.perSecond} log lines a second)`);
    this.tokens--;
    this.droppedUnsaid = 0;
  }
}
