/**
 * Polls every accepted run that is not yet terminal (GET /v1/jobs/{id} on a live gateway,
 * straight, not through the faulty front doors) and notes when each is first seen terminal:
 * the recovery time and "every 202 reaches a terminal state within the bound" are read from
 * these times. Errors (a gateway or Redis down) just mean "not seen yet".
 */
export class TerminalWatcher {
  readonly terminalAt = new Map<string, number>();
  private timer: NodeJS.Timeout | null = null;
  private busy = false;

  constructor(
    private readonly accepted: Map<string, number>,
    private readonly baseUrl: () => string | null,
    private readonly apiKey: string,
  ) {}

  start(everyMs = 300): void {
    this.timer = setInterval(() => void this.sweep(), everyMs);
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
  }

  /** Runs accepted but not yet seen terminal. */
  pending(): string[] {
    return [...this.accepted.keys()].filter((id) => !this.terminalAt.has(id));
  }

  async sweep(): Promise<void> {
    if (this.busy) return;
    this.busy = true;
    try {
      const base = this.baseUrl();
      if (!base) return;
      const ids = this.pending();
      for (let i = 0; i < ids.length; i += 16) {
        await Promise.all(
          ids.slice(i, i + 16).map(async (id) => {
            try {
              const res = await fetch(`${base}/v1/jobs/${id}`, { headers: { authorization: `Bearer ${this.apiKey}` }, signal: AbortSignal.timeout(3000) });
              const job = (await res.json()) as { terminal?: boolean };
              if (job.terminal && !this.terminalAt.has(id)) this.terminalAt.set(id, Date.now());
            } catch {
              // not seen this time
            }
          }),
        );
      }
    } finally {
      this.busy = false;
    }
  }
}
