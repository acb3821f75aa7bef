import { spawn, type ChildProcess } from 'node:child_process';
import { createHistogram } from 'node:perf_hooks';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { stopChild } from './child-server.js';
import { processCpuUs } from './cpu.js';
import { recordMs } from './job-driver.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');

export interface UserCycleOptions {
  gatewayUrl: string;
  apiKey: string;
  workerToken: string;
  workers: number;
  slots: number;
  kind: string;
  /** `Prefer: wait` seconds (the gateway's maximum is 60). */
  waitS: number;
}

/**
 * The job cycle as users run it: `switchyard worker --engine demo` processes (the command and
 * the SDK, as installed), each job one `POST /v1/jobs` with `Prefer: wait` that answers 201
 * with the finished job, its PNG artifact uploaded by the worker. Nothing follows the run
 * but the request itself, so the gateway also does the wait's work (its event subscription).
 */
export class UserCycle {
  private readonly children: ChildProcess[] = [];
  non201 = 0;
  errors = 0;
  readonly completedIds: string[] = [];

  constructor(private readonly o: UserCycleOptions) {}

  /** Starts the worker processes and resolves once the gateway counts them all. */
  async start(): Promise<void> {
    const { gatewayUrl, workerToken, workers, slots, kind } = this.o;
    for (let i = 0; i < workers; i++) {
      const child = spawn(
        process.execPath,
        ['api/bin/switchyard.mjs', 'worker', '--gateway', gatewayUrl, '--token', workerToken, '--kinds', kind, '--slots', String(slots), '--engine', 'demo', '--demo-delay-ms', '0'],
        { cwd: ROOT, env: { ...process.env, LOG_LEVEL: 'warn' }, stdio: ['ignore', 'ignore', 'inherit'] },
      );
      this.children.push(child);
    }
    const deadline = Date.now() + 60_000;
    for (;;) {
      const res = await fetch(`${gatewayUrl}/v1/network/capacity`).catch(() => null);
      const total = res?.ok ? ((await res.json()) as { workers: { total: number } }).workers.total : 0;
      if (total >= workers) return;
      if (Date.now() > deadline) throw new Error(`user cycle: ${total} of ${workers} CLI workers registered within 60 s`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  /** CPU of every worker process so far, µs. */
  workersCpuUs(): number {
    return this.children.reduce((n, c) => n + (c.pid ? processCpuUs(c.pid) : 0), 0);
  }

  async stop(): Promise<void> {
    await Promise.all(this.children.map((c) => stopChild(c)));
  }

  /** One job: submitted with `Prefer: wait`; true when it answered 201 with a succeeded job and its artifact. */
  private async job(n: number): Promise<boolean> {
    try {
      const res = await fetch(`${this.o.gatewayUrl}/v1/jobs`, {
        method: 'POST',
        headers: { authorization: `Bearer ${this.o.apiKey}`, 'content-type': 'application/json', prefer: `wait=${this.o.waitS}` },
        body: JSON.stringify({ kind: this.o.kind, input: { prompt: `a lighthouse ${n}` } }),
      });
      const body = (await res.json()) as { run_id?: string; status?: string; output?: { urls?: string[] } };
      if (res.status !== 201 || body.status !== 'succeeded' || !body.output?.urls?.length) {
        this.non201++;
        return false;
      }
      if (this.completedIds.length < 100_000) this.completedIds.push(body.run_id!);
      return true;
    } catch {
      this.errors++;
      return false;
    }
  }

  /** `concurrency` requests in flight at all times for `seconds`. */
  async closedLoop(seconds: number, concurrency: number) {
    const latency = createHistogram();
    let jobs = 0;
    let n = 0;
    const start = performance.now();
    const until = start + seconds * 1000;
    const loop = async () => {
      while (performance.now() < until) {
        const sent = performance.now();
        if (!(await this.job(n++))) continue;
        recordMs(latency, performance.now() - sent);
        jobs++;
      }
    };
    await Promise.all(Array.from({ length: concurrency }, loop));
    return { jobs, seconds: (performance.now() - start) / 1000, latency };
  }
}
