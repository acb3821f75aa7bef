import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createRedis, type RedisClient } from '../../models/redis-connection.js';
import { redisTarget } from '../../models/redis-target.js';
import { ADMIN_TOKEN } from '../helpers/harness.js';
import { GatewayProcess } from '../helpers/gateway-process.js';
import { RedisCluster } from '../helpers/redis-cluster.js';
import { RedisServerProcess } from '../helpers/redis-server-process.js';
import { S3StandIn } from '../helpers/s3-stand-in.js';
import { FaultProxy } from './fault-proxy.js';
import { WorkerFleet } from './worker-fleet.js';

/**
 * Short clocks, so a lost lease is noticed in seconds rather than the production 30 s: the
 * Redis pause scenario must outlast LEASE_TTL_MS, and the recovery bound is stated from these.
 */
export const CLOCKS = { LEASE_TTL_MS: 3000, HEARTBEAT_MS: 500, ENQUEUE_RECONCILE_AFTER_MS: 1000, SSE_PING_MS: 1000 };
export const PREFIX = 'chaos';

export interface ClusterOptions {
  redisBin: string;
  /**
   * Where the gateways keep their state: one redis-server with its AOF (the default), or a
   * Redis Cluster of 3 primaries and 3 replicas with REDIS_WAIT_REPLICAS=1 and artifacts in an
   * S3 stand-in, the deployment of docs/deploy.md past one machine (needs `cliBin`).
   */
  target?: 'server' | 'cluster';
  /** redis-cli, which makes the cluster. */
  cliBin?: string;
  workers: number;
  demoDelayMs: number;
  /** DATA_DIR (the shared artifact directory); a temporary directory when not given. */
  dataDir?: string;
}

/**
 * Everything under test, for real: a private redis-server with its AOF (appendfsync always,
 * RedisServerProcess: every acknowledged write is on disk before the answer, so a SIGKILL
 * loses nothing the gateways were told was stored, and "nothing accepted is lost" is a
 * promise about the gateway rather than about Redis's one-second fsync window), two `switchyard
 * serve` processes on it with one prefix and one DATA_DIR, a front door (a FaultProxy) before
 * each gateway for the clients, and the worker fleet.
 */
export class ChaosCluster {
  /** The one server (target `server`). */
  redis!: RedisServerProcess;
  /** The Redis Cluster (target `cluster`) and the object storage beside it. */
  redisCluster?: RedisCluster;
  private s3?: S3StandIn;
  readonly gateways: Array<GatewayProcess | null> = [null, null];
  readonly fronts: FaultProxy[] = [];
  fleet!: WorkerFleet;
  dataDir = '';
  private ownDataDir = false;
  apiKey = '';
  accountId = '';
  startCredits = 1_000_000;

  constructor(readonly opts: ClusterOptions) {}

  async start(): Promise<void> {
    if (this.opts.target === 'cluster') {
      this.redisCluster = await RedisCluster.start({ server: this.opts.redisBin, cli: this.opts.cliBin! });
      this.s3 = await new S3StandIn().start();
    } else {
      this.redis = await RedisServerProcess.start(this.opts.redisBin);
    }
    this.ownDataDir = !this.opts.dataDir;
    this.dataDir = this.opts.dataDir ?? mkdtempSync(path.join(os.tmpdir(), 'switchyard-chaos-data-'));
    await Promise.all([this.startGateway(0), this.startGateway(1)]);
    for (const i of [0, 1]) this.fronts.push(await new FaultProxy(() => (this.gateways[i] ? [this.gateways[i]!.port] : [])).listen());
    const account = await this.admin('/v1/admin/accounts', { name: 'chaos', credits: this.startCredits });
    this.apiKey = account.api_key;
    this.accountId = account.account.id;
    const operator = await this.admin('/v1/admin/operators', { name: 'chaos-fleet', trust: 'open' });
    this.fleet = new WorkerFleet(() => this.gatewayPorts(), operator.worker_token, this.opts.demoDelayMs);
    await this.fleet.start(this.opts.workers);
  }

  /** The gateways' key prefix as they write it (hash-tagged on a cluster). */
  get keyPrefix(): string {
    return this.redisCluster ? `{${PREFIX}}` : PREFIX;
  }

  /** A client of the gateways' Redis for the harness's own reads and sabotage: its commands wait out an outage. */
  tamperClient(): RedisClient {
    const target = this.redisCluster ? redisTarget('redis://127.0.0.1', this.redisCluster.setting) : redisTarget(this.redis.url);
    const client = createRedis(target, { name: 'chaos-tamper', blocking: true });
    client.on('error', () => {}); // Redis is down on purpose in some scenarios
    return client;
  }

  get frontUrls(): string[] {
    return this.fronts.map((f) => f.url);
  }

  gatewayPorts(): number[] {
    return this.gateways.filter((g): g is GatewayProcess => g !== null).map((g) => g.port);
  }

  async startGateway(i: number): Promise<void> {
    // On a cluster every accept and settle waits for a replica (REDIS_WAIT_REPLICAS): without it
    // a primary killed right after answering may take the write with it (docs/deploy.md).
    const redis: Record<string, string> = this.redisCluster
      ? { REDIS_CLUSTER_NODES: this.redisCluster.setting, REDIS_WAIT_REPLICAS: '1', REDIS_WAIT_TIMEOUT_MS: '300', ...this.s3!.env(PREFIX) }
      : { REDIS_URL: this.redis.url };
    const env = {
      ...redis,
      REDIS_PREFIX: PREFIX,
      DATA_DIR: this.dataDir,
      ...Object.fromEntries(Object.entries(CLOCKS).map(([k, v]) => [k, String(v)])),
      SHUTDOWN_DRAIN_MS: '2000',
    };
    this.gateways[i] = await new GatewayProcess(env).start();
  }

  /** Kills gateway `i` with `signal` and waits for the process to be gone (a SIGTERM drains first). */
  async stopGateway(i: number, signal: 'SIGKILL' | 'SIGTERM'): Promise<void> {
    const gw = this.gateways[i];
    if (!gw) return;
    gw.signal(signal);
    await gw.exited;
    this.gateways[i] = null;
  }

  /** A live gateway's URL, for the harness's own reads (not through the faulty fronts). */
  get directUrl(): string {
    const gw = this.gateways.find((g) => g !== null);
    if (!gw) throw new Error('no gateway is running');
    return gw.url;
  }

  private async admin(route: string, body: unknown): Promise<any> {
    const res = await fetch(`${this.directUrl}${route}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    if (res.status !== 201) throw new Error(`${route}: ${res.status} ${await res.text()}`);
    return res.json();
  }

  async stop(): Promise<void> {
    await this.fleet?.stop();
    for (const f of this.fronts) await f.close();
    for (const [i, g] of this.gateways.entries()) {
      await g?.kill();
      this.gateways[i] = null;
    }
    if (this.redis?.running) this.redis.signal('SIGCONT');
    await this.redis?.stop();
    await this.redisCluster?.stop();
    await this.s3?.stop();
    if (this.ownDataDir) rmSync(this.dataDir, { recursive: true, force: true });
  }
}
