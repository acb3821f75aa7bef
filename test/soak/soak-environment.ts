import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createDemoEngine } from '../../sdk/engines/demo/index.js';
import { SwitchyardWorker, silentLogger } from '../../sdk/worker/index.js';
import { GatewayProcess } from '../helpers/gateway-process.js';
import { ADMIN_TOKEN } from '../helpers/harness.js';
import { REDIS_SERVER, findProgram } from '../helpers/optional-program.js';
import { RedisServerProcess } from '../helpers/redis-server-process.js';
import { Receiver } from '../helpers/webhook-receiver.js';

export interface SoakSettings {
  /** Seconds a finished run (its record, events, webhook attempts), an artifact and a staged file are kept. */
  retentionSeconds: number;
  /** In-process demo workers, and the leases each runs at once. */
  workers: number;
  slots: number;
  /** How long the demo engine takes per job. */
  engineDelayMs: number;
}

/**
 * What a soak runs against: a private redis-server, `switchyard serve` as a child process on it,
 * a webhook receiver and a fleet of demo workers. Redis is private so that `used_memory` and
 * DBSIZE measure this gateway alone: the shared test Redis holds other suites' keys and its memory
 * moves with them. Retention is set to seconds (RUN_RETENTION_DAYS, ARTIFACT_RETENTION_DAYS,
 * FILE_RETENTION_DAYS are fractions of a day), so the gateway's own expiry, not the soak, is
 * what keeps the finished runs at a steady number within minutes.
 */
export class SoakEnvironment {
  redis!: RedisServerProcess;
  gateway!: GatewayProcess;
  receiver!: Receiver;
  readonly workers: SwitchyardWorker[] = [];
  accountKey = '';
  readonly prefix = 'soak';
  private readonly dir = mkdtempSync(path.join(os.tmpdir(), 'switchyard-soak-'));

  constructor(readonly settings: SoakSettings) {}

  async start(): Promise<this> {
    this.redis = await RedisServerProcess.start(redisServer());
    this.receiver = await new Receiver().start(this.dir);
    const days = String(this.settings.retentionSeconds / 86_400);
    this.gateway = await new GatewayProcess({
      REDIS_URL: this.redis.url,
      REDIS_PREFIX: this.prefix,
      DATA_DIR: path.join(this.dir, 'data'),
      // info: GatewayProcess waits for the 'gateway listening' line.
      LOG_LEVEL: 'info',
      RUN_RETENTION_DAYS: days,
      ARTIFACT_RETENTION_DAYS: days,
      FILE_RETENTION_DAYS: days,
      OUTBOUND_CA_FILE: Receiver.caFile(this.dir),
      OUTBOUND_ALLOW_CIDRS: '127.0.0.1/32',
      OUTBOUND_ALLOWED_PORTS: String(this.receiver.port),
      SHUTDOWN_DRAIN_MS: '0',
    }).start();
    const account = await this.admin('/v1/admin/accounts', { name: 'soak', credits: 1_000_000_000 });
    this.accountKey = account.api_key;
    const token = (await this.admin('/v1/admin/operators', { name: 'soak-fleet', trust: 'open' })).worker_token as string;
    for (let i = 0; i < this.settings.workers; i++) {
      const worker = new SwitchyardWorker({
        gateway: this.gateway.url,
        token,
        kinds: 'all',
        slots: this.settings.slots,
        handler: createDemoEngine({ delayMs: this.settings.engineDelayMs, espeakNg: null, pocketsphinx: null }),
        logger: silentLogger,
        progressIntervalMs: 0,
      });
      await worker.start();
      this.workers.push(worker);
    }
    return this;
  }

  get pid(): number {
    return this.gateway.child.pid!;
  }

  private async admin(p: string, body: unknown): Promise<any> {
    const res = await fetch(this.gateway.url + p, {
      method: 'POST',
      headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    if (res.status !== 201) throw new Error(`POST ${p}: ${res.status} ${await res.text()}`);
    return res.json();
  }

  async stop(): Promise<void> {
    await Promise.allSettled(this.workers.map((w) => w.stop({ timeoutMs: 0 })));
    await this.gateway?.kill();
    await this.receiver?.stop();
    await this.redis?.stop();
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/** redis-server from REDIS_SERVER_BIN or the PATH (a soak without it cannot start). */
function redisServer(): string {
  const bin = findProgram(REDIS_SERVER);
  if (!bin) throw new Error(`the soak needs redis-server: ${REDIS_SERVER.install}`);
  return bin;
}
