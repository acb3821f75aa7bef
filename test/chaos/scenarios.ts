import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { RedisKeys } from '../../models/redis/keys.js';
import { queueName } from '../../queues/queue-names.js';
import { CLOCKS, type ChaosCluster } from './chaos-cluster.js';
import { JOB } from './careful-client.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** What a scenario's fault did: the windows in which 5xx are expected. */
export interface FaultContext {
  cluster: ChaosCluster;
  /** Declares [from, now + graceMs] an outage window named `what`. */
  outage(what: string, from: number, graceMs?: number): void;
}

export interface Scenario {
  name: string;
  /** What it proves, for the docs and the --list output. */
  promise: string;
  /** Injects the fault and ends it (returns once the system is whole again, from the outside). */
  inject(ctx: FaultContext): Promise<void>;
  /** The Redis targets it runs on (ChaosCluster's `target`); default: the one server only. */
  on?: Array<'server' | 'cluster'>;
  /** Prepares a DATA_DIR the scenario needs (the full-disk one); null means use a temporary one. */
  dataDir?(): string | null;
  cleanup?(): void;
}

async function restartGatewayAfter(ctx: FaultContext, i: number, signal: 'SIGKILL' | 'SIGTERM'): Promise<void> {
  const from = Date.now();
  await ctx.cluster.stopGateway(i, signal);
  await sleep(1000);
  await ctx.cluster.startGateway(i);
  ctx.outage(`gateway ${i} ${signal}`, from, 1000);
}

/**
 * SIGKILLs the Redis Cluster primary serving `key`'s slot and returns once a replica serves it
 * and every live node says the cluster is whole again.
 */
async function killPrimaryOf(ctx: FaultContext, key: string, what: string): Promise<void> {
  const cluster = ctx.cluster.redisCluster;
  if (!cluster) throw new Error(`${what}: the scenario needs a Redis Cluster`);
  const from = Date.now();
  const primary = await cluster.primaryOf(key);
  await cluster.kill(primary);
  const survivor = cluster.nodes.find((n) => n.port !== primary)!.port;
  await cluster.until(async () => (await cluster.liveOk()) && (await cluster.primaryOf(key, survivor)) !== primary, `a replica promoted in place of ${what}`, 60_000);
  ctx.outage(what, from, 3000);
}

/** The tmpfs mounted for the full-disk scenario, if any. */
let diskMount: string | null = null;

export const SCENARIOS: Scenario[] = [
  {
    name: 'gateway-kill',
    on: ['server', 'cluster'],
    promise: 'a gateway SIGKILLed under load loses no accepted run and settles none twice; its leases and unqueued runs are recovered by the other',
    inject: (ctx) => restartGatewayAfter(ctx, 0, 'SIGKILL'),
  },
  {
    name: 'gateway-term',
    on: ['server', 'cluster'],
    promise: 'a gateway stopped with SIGTERM hands its leases over and loses nothing',
    inject: (ctx) => restartGatewayAfter(ctx, 1, 'SIGTERM'),
  },
  {
    name: 'redis-kill',
    promise: 'Redis SIGKILLed and restarted from its AOF: every acknowledged run is still there and finishes',
    async inject(ctx) {
      const from = Date.now();
      await ctx.cluster.redis.kill();
      await sleep(2000);
      await ctx.cluster.redis.restart();
      ctx.outage('redis down', from, 3000);
    },
  },
  {
    name: 'redis-pause',
    promise: `Redis frozen (SIGSTOP) for longer than LEASE_TTL_MS (${CLOCKS.LEASE_TTL_MS} ms), then thawed: leases that lapsed are requeued, none is finished twice`,
    async inject(ctx) {
      const from = Date.now();
      ctx.cluster.redis.signal('SIGSTOP');
      await sleep(CLOCKS.LEASE_TTL_MS + 2000);
      ctx.cluster.redis.signal('SIGCONT');
      ctx.outage('redis paused', from, 3000);
    },
  },
  {
    name: 'worker-kill-storm',
    on: ['server', 'cluster'],
    promise: 'workers SIGKILLed mid-job, again and again: their jobs are requeued and finished once',
    async inject(ctx) {
      const fleet = ctx.cluster.fleet;
      for (let round = 0; round < 3; round++) {
        await fleet.kill(fleet.members.filter((m) => m.index % 2 === round % 2).map((m) => m.index));
        await sleep(700);
        fleet.respawnDead();
        await sleep(700);
      }
    },
  },
  {
    name: 'worker-partition',
    on: ['server', 'cluster'],
    promise: 'half the workers cut off, then delayed, then blackholed past the lease TTL: their leases move to other workers and nothing is finished twice',
    async inject(ctx) {
      const cut = ctx.cluster.fleet.members.filter((m) => m.index % 2 === 0).map((m) => m.proxy);
      for (const p of cut) p.set('cut');
      await sleep(2000);
      for (const p of cut) p.set('delay', 300);
      await sleep(2000);
      for (const p of cut) p.set('blackhole');
      await sleep(CLOCKS.LEASE_TTL_MS + 1500);
      for (const p of cut) p.set('up');
    },
  },
  {
    name: 'primary-kill',
    on: ['cluster'],
    promise: "the Redis Cluster primary holding the gateways' runs SIGKILLed under load: its replica is promoted, the gateways follow, and (REDIS_WAIT_REPLICAS=1) no accepted run is lost or finished twice",
    // The account's runs are in its group's slot (models/redis/keys.ts).
    inject: (ctx) => killPrimaryOf(ctx, new RedisKeys(ctx.cluster.keyPrefix).account(ctx.cluster.accountId), "the runs' primary"),
  },
  {
    name: 'queue-primary-kill',
    on: ['cluster'],
    promise: "the Redis Cluster primary holding the job queue SIGKILLed under load: leases it held lapse and are run again, adds it took are queued again, nothing is lost or finished twice",
    inject: (ctx) => killPrimaryOf(ctx, new RedisKeys(ctx.cluster.keyPrefix).queuePrefixOf(queueName(JOB.kind, 'open')), "the queue's primary"),
  },
  {
    name: 'disk-full',
    promise: 'the artifact directory full (a 4 MiB tmpfs filled up): uploads fail, runs fail or retry, credits come back, nothing is lost',
    dataDir() {
      const dir = mkdtempSync(path.join(os.tmpdir(), 'switchyard-chaos-disk-'));
      try {
        execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=4m', 'tmpfs', dir], { stdio: 'ignore' });
      } catch {
        rmSync(dir, { recursive: true, force: true });
        return null;
      }
      diskMount = dir;
      return dir;
    },
    async inject(ctx) {
      if (!diskMount) throw new Error('disk-full: mounting a tmpfs is not permitted here (needs root and CAP_SYS_ADMIN)');
      const filler = path.join(ctx.cluster.dataDir, 'filler');
      const from = Date.now();
      try {
        writeFileSync(filler, Buffer.alloc(8 * 1024 * 1024));
      } catch {
        // ENOSPC is the point: the disk is now full
      }
      await sleep(3000);
      rmSync(filler, { force: true });
      ctx.outage('disk full', from, 1000);
    },
    cleanup() {
      if (!diskMount) return;
      try {
        execFileSync('umount', [diskMount], { stdio: 'ignore' });
      } catch {
        // already gone
      }
      rmSync(diskMount, { recursive: true, force: true });
      diskMount = null;
    },
  },
];

/** Why a scenario cannot run on this machine (disk-full: mounting a tmpfs needs root and CAP_SYS_ADMIN), or null. */
export function unavailableReason(s: Scenario): string | null {
  if (s.name !== 'disk-full') return null;
  const dir = mkdtempSync(path.join(os.tmpdir(), 'switchyard-chaos-probe-'));
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=64k', 'tmpfs', dir], { stdio: 'ignore' });
    execFileSync('umount', [dir], { stdio: 'ignore' });
    return null;
  } catch {
    return 'mounting a tmpfs is not permitted here (needs root and CAP_SYS_ADMIN)';
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

export function scenarioNamed(name: string): Scenario {
  const s = SCENARIOS.find((x) => x.name === name);
  if (!s) throw new Error(`no scenario ${name}; there are ${SCENARIOS.map((x) => x.name).join(', ')}`);
  return s;
}
