import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import { ADMIN_TOKEN, REDIS_URL, TEST_TOOL_SECRET_KEY, testStorageEnv } from './harness.js';

/** One JSON log line of a gateway. */
export type LogLine = Record<string, any> & { msg?: string; level?: number };

/**
 * `switchyard serve` in its own process, as production runs it: real signals, real exit
 * codes, and every JSON log line it writes on stdout kept for assertions.
 */
export class GatewayProcess {
  child!: ChildProcess;
  url = '';
  port = 0;
  /** The instance's id (its fleet counts' tag), from its 'gateway listening' line. */
  gatewayId = '';
  readonly lines: LogLine[] = [];
  /** Stdout lines that were not JSON (there should be none). */
  readonly stray: string[] = [];
  exited!: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;

  constructor(readonly env: Record<string, string>) {}

  /** Spawns `serve` (PORT=0 unless given) and resolves once it logs that it listens. */
  async start(): Promise<this> {
    this.child = spawn(process.execPath, ['api/bin/switchyard.mjs', 'serve'], {
      env: { ...process.env, PORT: '0', HOST: '127.0.0.1', REDIS_URL, ADMIN_TOKEN, TOOL_SECRET_KEY: TEST_TOOL_SECRET_KEY, LOG_LEVEL: 'info', RATE_LIMIT_PER_SEC: '0', ...testStorageEnv(this.env.REDIS_PREFIX ?? 'sy'), ...this.env },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    this.exited = once(this.child, 'exit').then(([code, signal]) => ({ code, signal }));
    const listening = new Promise<void>((resolve, reject) => {
      createInterface({ input: this.child.stdout! }).on('line', (text) => {
        let line: LogLine;
        try {
          line = JSON.parse(text) as LogLine;
        } catch {
          this.stray.push(text);
          return;
        }
        this.lines.push(line);
        if (line.msg === 'gateway listening') {
          this.url = line.url;
          this.gatewayId = String(line.gatewayId);
          this.port = Number(new URL(line.url).port);
          resolve();
        }
      });
      void this.exited.then(() => reject(new Error('the gateway exited before listening')));
    });
    await listening;
    return this;
  }

  /** One JSON request with a bearer token; the status and the parsed body (null when empty). */
  async call(method: string, route: string, token: string, body?: unknown): Promise<{ status: number; body: any }> {
    const res = await fetch(this.url + route, { method, headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, ...(body !== undefined && { body: JSON.stringify(body) }) });
    const text = await res.text();
    return { status: res.status, body: text ? JSON.parse(text) : null };
  }

  /** Log lines with this message. */
  logged(msg: string): LogLine[] {
    return this.lines.filter((l) => l.msg === msg);
  }

  signal(signal: NodeJS.Signals): void {
    this.child.kill(signal);
  }

  /** Kills it for good (test cleanup); a no-op once it has exited. */
  async kill(): Promise<void> {
    if (this.child.exitCode === null && this.child.signalCode === null) {
      this.child.kill('SIGKILL');
      await this.exited;
    }
  }
}
