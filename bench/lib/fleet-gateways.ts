import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { startIpcChild, type IpcChild } from './ipc-child.js';
import { freePort } from './private-redis.js';

const PROBE = pathToFileURL(path.join(path.dirname(fileURLToPath(import.meta.url)), 'memory-probe.ts')).href;

async function post<T>(url: string, token: string, body: unknown): Promise<T> {
  const res = await fetch(url, { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: JSON.stringify(body) });
  if (res.status !== 201) throw new Error(`POST ${url}: ${res.status} ${await res.text()}`);
  return (await res.json()) as T;
}

/** A window of a gateway's event loop (bench/lib/memory-probe.ts). */
export interface LoopFigures {
  delayP50Ms: number;
  delayP99Ms: number;
  delayMaxMs: number;
  gcCount: number;
  gcTotalMs: number;
  gcMaxMs: number;
  /** Of the longest pause: scavenge, mark-compact, ... */
  gcMaxKind: string;
  gcMarkCompacts: number;
}

/**
 * `count` real gateway instances (bench/servers/gateway-server.ts) on one store, each on a port
 * of its own that it keeps across a restart (as behind a load balancer, workers dial the same
 * address again), each with the memory probe preloaded so its RSS is read after a full GC.
 */
export class FleetGateways {
  readonly urls: string[];
  private children: IpcChild[] = [];
  apiKey = '';
  workerToken = '';

  private constructor(
    private readonly ports: number[],
    private readonly env: Record<string, string>,
    private readonly nodeArgs: string[],
  ) {
    this.urls = ports.map((p) => `http://127.0.0.1:${p}`);
  }

  /** `nodeArgs` go to each gateway's Node before the benchmark's own (`--max-semi-space-size=32`, say). */
  static async start(count: number, redisUrl: string, prefix: string, dataDir: string, nodeArgs: string[] = []): Promise<FleetGateways> {
    const adminToken = randomBytes(24).toString('hex');
    const env = {
      HOST: '127.0.0.1', REDIS_URL: redisUrl, REDIS_PREFIX: prefix, ADMIN_TOKEN: adminToken, DATA_DIR: dataDir, LOG_LEVEL: 'warn',
      RATE_LIMIT_PER_SEC: '1000000', RATE_LIMIT_BURST: '1000000', SHUTDOWN_DRAIN_MS: '0',
      // Instances sharing a store must share it (docs/deploy.md).
      TOOL_SECRET_KEY: randomBytes(32).toString('base64'),
    };
    const ports: number[] = [];
    for (let i = 0; i < count; i++) ports.push(await freePort());
    const g = new FleetGateways(ports, env, nodeArgs);
    await g.startAll();
    const { api_key: apiKey } = await post<{ api_key: string }>(`${g.urls[0]}/v1/admin/accounts`, adminToken, { name: 'bench', credits: 1e12 });
    const { worker_token: workerToken } = await post<{ worker_token: string }>(`${g.urls[0]}/v1/admin/operators`, adminToken, { name: 'bench', trust: 'open' });
    g.apiKey = apiKey;
    g.workerToken = workerToken;
    return g;
  }

  get pids(): number[] {
    return this.children.map((c) => c.pid);
  }

  /** Starts every instance (again); resolves once all listen. */
  async startAll(): Promise<void> {
    this.children = await Promise.all(
      this.ports.map((port) => startIpcChild('servers/gateway-server.ts', { env: { ...this.env, PORT: String(port) }, nodeArgs: [...this.nodeArgs, '--expose-gc', '--import', PROBE], printsUrl: true })),
    );
  }

  /** SIGKILL every instance, as a crash or a host restart: no drain, no goodbye to the workers. */
  async killAll(): Promise<void> {
    await Promise.all(
      this.children.map(async (c) => {
        try {
          process.kill(c.pid, 'SIGKILL');
        } catch {
          // gone already
        }
        await c.stop();
      }),
    );
  }

  /** RSS of each instance after two full GCs, in bytes. */
  async rss(): Promise<number[]> {
    return Promise.all(this.children.map(async (c) => (await c.request<{ rss: number }>('memory', { gc: true })).rss));
  }

  /** Starts watching each instance's event loop (delay and GC pauses) until `loopStop`. */
  async loopStart(): Promise<void> {
    await Promise.all(this.children.map((c) => c.request('loop-start')));
  }

  /** The window's event-loop delay and GC pauses, the worst instance's of each figure. */
  async loopStop(): Promise<LoopFigures> {
    const all = await Promise.all(this.children.map((c) => c.request<LoopFigures>('loop-stop')));
    const worst = (k: Exclude<keyof LoopFigures, 'gcMaxKind'>) => Math.max(...all.map((f) => f[k]));
    const longest = all.reduce((a, b) => (b.gcMaxMs > a.gcMaxMs ? b : a));
    return { delayP50Ms: worst('delayP50Ms'), delayP99Ms: worst('delayP99Ms'), delayMaxMs: worst('delayMaxMs'), gcCount: worst('gcCount'), gcMarkCompacts: worst('gcMarkCompacts'), gcTotalMs: worst('gcTotalMs'), gcMaxMs: longest.gcMaxMs, gcMaxKind: longest.gcMaxKind };
  }

  async stop(): Promise<void> {
    await Promise.all(this.children.map((c) => c.stop()));
  }
}
