import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import { until } from './harness.js';

/**
 * `npm run dev -- <args>` in its own process group, as a developer starts it: resolves once the
 * banner is printed (its last line names the API description), keeping the banner's text.
 */
export class DevProcess {
  child!: ChildProcess;
  banner = '';
  url = '';
  stderr = '';
  exited!: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;

  constructor(
    readonly args: string[],
    readonly env: Record<string, string>,
  ) {}

  async start(): Promise<this> {
    // The developer's shell has no ADMIN_TOKEN: dev makes its own.
    const { ADMIN_TOKEN: _unset, ...env } = process.env;
    this.child = spawn('npm', ['run', '--silent', 'dev', '--', ...this.args], { env: { ...env, ...this.env }, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    this.exited = once(this.child, 'exit').then(([code, signal]) => ({ code, signal }));
    this.child.stderr!.on('data', (d) => (this.stderr += d));
    await new Promise<void>((resolve, reject) => {
      let inBanner = false;
      createInterface({ input: this.child.stdout! }).on('line', (line) => {
        if (line.startsWith('Switchyard is running at ')) {
          inBanner = true;
          this.url = line.slice('Switchyard is running at '.length).trim();
        }
        if (!inBanner) return;
        this.banner += `${line}\n`;
        if (line.startsWith('API description:')) resolve();
      });
      void this.exited.then(({ code }) => reject(new Error(`npm run dev exited (${code}) before its banner:\n${this.stderr}`)));
    });
    return this;
  }

  /** The first capture group of `re` in the banner; fails naming the pattern when absent. */
  match(re: RegExp): string {
    const m = re.exec(this.banner);
    if (!m) throw new Error(`the dev banner has no ${re}:\n${this.banner}`);
    return m[1];
  }

  /** SIGTERM to the whole group (npm, its shell, the gateway), then waits until the gateway is gone. */
  async stop(): Promise<void> {
    if (!this.child || this.child.exitCode !== null || this.child.signalCode !== null) return;
    process.kill(-this.child.pid!, 'SIGTERM');
    await this.exited;
    if (this.url) {
      await until('the dev gateway stopped', async () => fetch(`${this.url}/healthz`).then(() => false, () => true), 20_000);
    }
  }
}
