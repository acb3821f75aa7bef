import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { Redis } from 'ioredis';

/** CPU used during one measured window, in µs. */
export interface CpuTotals {
  wallUs: number;
  /** utime+stime of the server child, all its threads (JS, GC, libuv pool); absent for raw BullMQ. */
  serverUs?: number;
  /** process.cpuUsage() of this process: the load generator, and for raw BullMQ the queue client. */
  parentUs: number;
  /** INFO cpu used_cpu_user+used_cpu_sys: all Redis threads, and anything else using this shared Redis. */
  redisUs: number;
  /** The same for Redis's main thread alone, the one that runs every command. */
  redisMainThreadUs: number;
  /** Busy time of all CPUs from /proc/stat, whoever used it. */
  machineBusyUs: number;
}

/** Starts a window; the returned function ends it. */
export type StartCpuWindow = () => Promise<() => Promise<CpuTotals>>;

let ticks: number | undefined;
/** Unit of the /proc times. Node has no API for sysconf(_SC_CLK_TCK), so ask getconf once. */
function clockTicks(): number {
  ticks ??= Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim());
  if (!(ticks > 0)) throw new Error(`getconf CLK_TCK gave ${ticks}`);
  return ticks;
}

const ticksToUs = (t: number) => (t / clockTicks()) * 1e6;

function processUs(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  // Field 2 (comm) may hold spaces or ')', so split after its last ')': index 0 is field 3,
  // so utime (field 14) and stime (field 15) are at 11 and 12.
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return ticksToUs(Number(f[11]) + Number(f[12]));
}

function machineBusyUs(): number {
  // user nice system idle iowait irq softirq steal: idle, iowait and steal are not work done here.
  const [user, nice, system, , , irq, softirq] = readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1).map(Number);
  return ticksToUs(user + nice + system + irq + softirq);
}

async function redisUs(redis: Redis): Promise<{ all: number; main: number }> {
  const info = await redis.info('cpu');
  const field = (k: string) => {
    const v = Number(new RegExp(`^${k}:(\\S+)`, 'm').exec(info)?.[1]);
    if (!Number.isFinite(v)) throw new Error(`INFO cpu has no ${k}`);
    return v * 1e6;
  };
  return {
    all: field('used_cpu_user') + field('used_cpu_sys'),
    main: field('used_cpu_user_main_thread') + field('used_cpu_sys_main_thread'),
  };
}

async function snapshot(redis: Redis, serverPid?: number): Promise<CpuTotals> {
  const r = await redisUs(redis);
  const own = process.cpuUsage();
  return {
    wallUs: performance.now() * 1000,
    serverUs: serverPid === undefined ? undefined : processUs(serverPid),
    parentUs: own.user + own.system,
    redisUs: r.all,
    redisMainThreadUs: r.main,
    machineBusyUs: machineBusyUs(),
  };
}

/** Reads CPU counters around measured windows, over one Redis connection of its own. */
export class CpuMeter {
  private readonly redis: Redis;

  constructor(redisUrl: string) {
    this.redis = new Redis(redisUrl);
  }

  window(serverPid?: number): StartCpuWindow {
    return async () => {
      const a = await snapshot(this.redis, serverPid);
      return async () => {
        const b = await snapshot(this.redis, serverPid);
        return {
          wallUs: b.wallUs - a.wallUs,
          serverUs: serverPid === undefined ? undefined : b.serverUs! - a.serverUs!,
          parentUs: b.parentUs - a.parentUs,
          redisUs: b.redisUs - a.redisUs,
          redisMainThreadUs: b.redisMainThreadUs - a.redisMainThreadUs,
          machineBusyUs: b.machineBusyUs - a.machineBusyUs,
        };
      };
    };
  }

  close(): void {
    this.redis.disconnect();
  }
}
