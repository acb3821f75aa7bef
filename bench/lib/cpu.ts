import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { Redis } from 'ioredis';

/** CPU used during one measured window, in µs. */
export interface CpuTotals {
  wallUs: number;
  /** utime+stime of the server child, all its threads (JS, GC, libuv pool); absent for raw BullMQ. */
  serverUs?: number;
  /** The server child's main thread alone: its event loop, which one core bounds. */
  serverMainThreadUs?: number;
  /** process.cpuUsage() of this process: the load generator, and for raw BullMQ the queue client. */
  parentUs: number;
  parentMainThreadUs: number;
  /** INFO cpu used_cpu_user+used_cpu_sys: all Redis threads, and anything else using this shared Redis. */
  redisUs: number;
  /** The same for Redis's main thread alone, the one that runs every command. */
  redisMainThreadUs: number;
  /** Busy time of all CPUs from /proc/stat, whoever used it. */
  machineBusyUs: number;
  /**
   * INFO commandstats deltas: `usec` is execution time only (no socket I/O), and commands a Lua
   * script calls count both under their own name and inside the script's EVALSHA.
   */
  redisCommands: Record<string, { calls: number; usec: number }>;
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

/** utime+stime from /proc/<pid>/stat (all threads) or /proc/<pid>/task/<pid>/stat (main thread). */
function statUs(file: string): number {
  const stat = readFileSync(file, 'utf8');
  // Field 2 (comm) may hold spaces or ')', so split after its last ')': index 0 is field 3,
  // so utime (field 14) and stime (field 15) are at 11 and 12.
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return ticksToUs(Number(f[11]) + Number(f[12]));
}

/** utime+stime of a whole process (all its threads), in µs. */
export const processCpuUs = (pid: number) => statUs(`/proc/${pid}/stat`);

/** utime+stime of a process's main thread (its event loop), in µs. */
export const mainThreadCpuUs = (pid: number) => statUs(`/proc/${pid}/task/${pid}/stat`);

function machineBusyUs(): number {
  // user nice system idle iowait irq softirq steal: idle, iowait and steal are not work done here.
  const [user, nice, system, , , irq, softirq] = readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1).map(Number);
  return ticksToUs(user + nice + system + irq + softirq);
}

async function redisStats(redis: Redis) {
  const info = await redis.info('cpu', 'commandstats');
  const field = (k: string) => {
    const v = Number(new RegExp(`^${k}:(\\S+)`, 'm').exec(info)?.[1]);
    if (!Number.isFinite(v)) throw new Error(`INFO cpu has no ${k}`);
    return v * 1e6;
  };
  const commands: CpuTotals['redisCommands'] = {};
  for (const [, name, calls, usec] of info.matchAll(/^cmdstat_(\S+?):calls=(\d+),usec=(\d+)/gm)) commands[name] = { calls: Number(calls), usec: Number(usec) };
  return {
    all: field('used_cpu_user') + field('used_cpu_sys'),
    main: field('used_cpu_user_main_thread') + field('used_cpu_sys_main_thread'),
    commands,
  };
}

function commandDeltas(a: CpuTotals['redisCommands'], b: CpuTotals['redisCommands']): CpuTotals['redisCommands'] {
  const d: CpuTotals['redisCommands'] = {};
  for (const [name, { calls, usec }] of Object.entries(b)) {
    const before = a[name] ?? { calls: 0, usec: 0 };
    if (calls > before.calls) d[name] = { calls: calls - before.calls, usec: usec - before.usec };
  }
  return d;
}

async function snapshot(redis: Redis, serverPid?: number): Promise<CpuTotals> {
  const r = await redisStats(redis);
  const own = process.cpuUsage();
  return {
    wallUs: performance.now() * 1000,
    serverUs: serverPid === undefined ? undefined : statUs(`/proc/${serverPid}/stat`),
    serverMainThreadUs: serverPid === undefined ? undefined : statUs(`/proc/${serverPid}/task/${serverPid}/stat`),
    parentUs: own.user + own.system,
    parentMainThreadUs: statUs(`/proc/${process.pid}/task/${process.pid}/stat`),
    redisUs: r.all,
    redisMainThreadUs: r.main,
    machineBusyUs: machineBusyUs(),
    redisCommands: r.commands,
  };
}

/** The totals of two windows (of the same server process) as one: a phase measured in slices. */
export function addCpuTotals(a: CpuTotals | undefined, b: CpuTotals): CpuTotals {
  if (!a) return b;
  const opt = (x?: number, y?: number) => (x === undefined || y === undefined ? undefined : x + y);
  const redisCommands = { ...a.redisCommands };
  for (const [name, { calls, usec }] of Object.entries(b.redisCommands)) {
    const before = redisCommands[name] ?? { calls: 0, usec: 0 };
    redisCommands[name] = { calls: before.calls + calls, usec: before.usec + usec };
  }
  return {
    wallUs: a.wallUs + b.wallUs,
    serverUs: opt(a.serverUs, b.serverUs),
    serverMainThreadUs: opt(a.serverMainThreadUs, b.serverMainThreadUs),
    parentUs: a.parentUs + b.parentUs,
    parentMainThreadUs: a.parentMainThreadUs + b.parentMainThreadUs,
    redisUs: a.redisUs + b.redisUs,
    redisMainThreadUs: a.redisMainThreadUs + b.redisMainThreadUs,
    machineBusyUs: a.machineBusyUs + b.machineBusyUs,
    redisCommands,
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
          serverMainThreadUs: serverPid === undefined ? undefined : b.serverMainThreadUs! - a.serverMainThreadUs!,
          parentUs: b.parentUs - a.parentUs,
          parentMainThreadUs: b.parentMainThreadUs - a.parentMainThreadUs,
          redisUs: b.redisUs - a.redisUs,
          redisMainThreadUs: b.redisMainThreadUs - a.redisMainThreadUs,
          machineBusyUs: b.machineBusyUs - a.machineBusyUs,
          redisCommands: commandDeltas(a.redisCommands, b.redisCommands),
        };
      };
    };
  }

  close(): void {
    this.redis.disconnect();
  }
}
