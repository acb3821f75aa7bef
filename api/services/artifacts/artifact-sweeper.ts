import type { Logger } from 'pino';
import type { ArtifactStore } from '../../../models/artifact-store.js';
import type { FileService } from '../files/file-service.js';

export interface ArtifactSweeperOptions {
  store: ArtifactStore;
  /** Account files past their retention go in the same sweep, records first (their quota frees at once). */
  files?: Pick<FileService, 'sweep'>;
  log: Logger;
  /** Time between sweeps. @defaultValue 10 minutes */
  intervalMs?: number;
}

/**
 * Retention: deletes account files and artifacts past their `expires_at` (and abandoned partial uploads) every
 * `intervalMs`. Every gateway instance runs one; sweeps of a shared DATA_DIR may overlap
 * harmlessly (deleting what is already gone is not an error). Expired artifacts answer 404
 * from the moment they expire, whether or not a sweep has removed them yet.
 */
export class ArtifactSweeper {
  private readonly intervalMs: number;
  private timer?: NodeJS.Timeout;
  private last: Promise<unknown> = Promise.resolve();
  private stopped = true;

  constructor(private readonly opts: ArtifactSweeperOptions) {
    this.intervalMs = opts.intervalMs ?? 10 * 60 * 1000;
  }

  start(): void {
    if (!this.stopped) return;
    this.stopped = false;
    this.schedule(Math.min(this.intervalMs, 30_000));
  }

  private schedule(delayMs: number): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      void this.sweep()
        .catch((err) => this.opts.log.warn({ err }, 'artifact sweep failed'))
        .finally(() => this.schedule(this.intervalMs));
    }, delayMs);
    this.timer.unref();
  }

  /** One sweep now, after any sweep in progress; resolves with the number of artifacts deleted (account files' bytes included). */
  sweep(now: Date = new Date()): Promise<number> {
    const run = this.last.then(async () => {
      const files = (await this.opts.files?.sweep(now)) ?? 0;
      if (files > 0) this.opts.log.info({ deleted: files }, 'expired files deleted');
      return this.opts.store.deleteExpired(now);
    });
    this.last = run.catch(() => 0);
    return run.then((deleted) => {
      if (deleted > 0) this.opts.log.info({ deleted }, 'expired artifacts deleted');
      return deleted;
    });
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.last;
  }
}
