// A real Prometheus (Debian's package; see optional-program.ts) as a child process on a free loopback port,
// with its config and TSDB in a temp dir that stop() removes.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { until } from './harness.js';
import { freePort } from './ports.js';


export interface PromQueryResult {
  metric: Record<string, string>;
  value: [number, string];
}

export class PrometheusServer {
  private output = '';
  private exited = false;

  private constructor(readonly url: string, private readonly child: ChildProcess, private readonly dir: string) {
    child.stdout?.on('data', (d) => (this.output += d));
    child.stderr?.on('data', (d) => (this.output += d));
    child.once('exit', () => (this.exited = true));
  }

  /** Starts Prometheus (the executable `bin`) with `configYaml` and resolves once it reports ready. */
  static async start(bin: string, configYaml: string): Promise<PrometheusServer> {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'switchyard-prometheus-'));
    const config = path.join(dir, 'prometheus.yml');
    await writeFile(config, configYaml);
    const port = await freePort();
    const child = spawn(bin, [`--config.file=${config}`, `--storage.tsdb.path=${path.join(dir, 'data')}`, `--web.listen-address=127.0.0.1:${port}`], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const prom = new PrometheusServer(`http://127.0.0.1:${port}`, child, dir);
    // A missing binary emits 'error' and never 'exit'.
    child.once('error', (err) => {
      prom.output += `spawn failed: ${err.message}`;
      prom.exited = true;
    });
    try {
      await until('prometheus to be ready', async () => {
        if (prom.exited) throw new Error(`prometheus exited:\n${prom.output}`);
        return fetch(`${prom.url}/-/ready`).then((r) => r.ok, () => false);
      }, 30_000);
    } catch (err) {
      await prom.stop();
      throw err;
    }
    return prom;
  }

  /** GET /api/v1/query; a PromQL error comes back as a rejected promise with Prometheus's message. */
  async query(expr: string): Promise<PromQueryResult[]> {
    const res = await fetch(`${this.url}/api/v1/query?${new URLSearchParams({ query: expr })}`);
    const body = (await res.json()) as { status: string; error?: string; data?: { resultType: string; result: PromQueryResult[] } };
    if (body.status !== 'success') throw new Error(`query failed (${body.error}): ${expr}`);
    return body.data!.result;
  }

  async rules(): Promise<{ name: string; health: string; lastError?: string }[]> {
    const body = (await (await fetch(`${this.url}/api/v1/rules`)).json()) as { data: { groups: { rules: { name: string; health: string; lastError?: string }[] }[] } };
    return body.data.groups.flatMap((g) => g.rules);
  }

  async stop(): Promise<void> {
    if (!this.exited && this.child.exitCode === null) {
      const gone = new Promise((resolve) => this.child.once('exit', resolve));
      this.child.kill('SIGTERM');
      const timer = setTimeout(() => this.child.kill('SIGKILL'), 10_000);
      await gone;
      clearTimeout(timer);
    }
    await rm(this.dir, { recursive: true, force: true });
  }
}
