import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { startChildServer, type ChildServer } from './child-server.js';
import { adminPost } from './job-driver.js';
import { deletePrefix } from './redis-cleanup.js';

/** What a benchmark leaves behind, and how it is removed: a Redis prefix, a data directory, children to stop. */
export interface Scratch {
  prefix: string;
  dataDir: string;
  /** Stopped last first by `cleanup`. */
  stoppers: Array<() => Promise<void>>;
  /** Stops the children, deletes every key under the prefix and the directory; also on Ctrl-C. */
  cleanup(): Promise<void>;
}

export async function benchScratch(name: string, redisUrl: string): Promise<Scratch> {
  const prefix = `bench-${name}-${randomBytes(4).toString('hex')}`;
  const dataDir = await mkdtemp(path.join(os.tmpdir(), `switchyard-bench-${name}-`));
  const stoppers: Array<() => Promise<void>> = [];
  const cleanup = async () => {
    for (const stop of stoppers.splice(0).reverse()) await stop().catch(() => {});
    await deletePrefix(redisUrl, prefix);
    await rm(dataDir, { recursive: true, force: true });
  };
  process.once('SIGINT', () => void cleanup().finally(() => process.exit(130)));
  return { prefix, dataDir, stoppers, cleanup };
}

export interface BenchGateway {
  server: ChildServer;
  /** For further admin calls (declaring models), and for more instances on the same store. */
  adminToken: string;
  /** Of an account with credits no run can exhaust. */
  apiKey: string;
  /** An open-tier operator's worker token. */
  workerToken: string;
}

export interface BenchGatewayOptions {
  redisUrl: string;
  prefix: string;
  dataDir: string;
  profileDir?: string;
  /** More settings, over the ones given here. */
  env?: Record<string, string>;
}

/**
 * The real gateway in a child process (bench/servers/gateway-server.ts) with LOG_LEVEL=warn and
 * a rate limit the load never reaches, plus an account and an operator made through the admin
 * API. The caller stops `server`.
 */
export async function startBenchGateway(o: BenchGatewayOptions): Promise<BenchGateway> {
  const adminToken = randomBytes(24).toString('hex');
  const server = await startGatewayInstance(o, adminToken);
  try {
    const { api_key: apiKey } = await adminPost<{ api_key: string }>(server, adminToken, '/v1/admin/accounts', { name: 'bench', credits: 1e12 });
    const { worker_token: workerToken } = await adminPost<{ worker_token: string }>(server, adminToken, '/v1/admin/operators', { name: 'bench', trust: 'open' });
    return { server, adminToken, apiKey, workerToken };
  } catch (err) {
    await server.stop();
    throw err;
  }
}

/**
 * One gateway child with the settings of `startBenchGateway` and nothing made through it: a
 * further instance on the same store (the same prefix, data directory and admin token; give
 * every instance the same TOOL_SECRET_KEY in `env`, as instances sharing a store must share it).
 */
export function startGatewayInstance(o: BenchGatewayOptions, adminToken: string): Promise<ChildServer> {
  return startChildServer('gateway-server.ts', {
    PORT: '0', HOST: '127.0.0.1', REDIS_URL: o.redisUrl, REDIS_PREFIX: o.prefix, ADMIN_TOKEN: adminToken, DATA_DIR: o.dataDir,
    LOG_LEVEL: 'warn', RATE_LIMIT_PER_SEC: '1000000', RATE_LIMIT_BURST: '1000000', ...o.env,
  }, o.profileDir);
}
