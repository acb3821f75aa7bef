import type { Measurement } from './measurement.js';

/** Where one phase's CPU went, per accepted job, and the throughput that CPU allows. */
export interface CpuPerJob {
  /** The server child; for raw BullMQ the parent, which runs the queue client and the load. */
  processUsPerJob: number;
  /** That process's main thread alone (its event loop; the rest is GC and libuv helper threads). */
  processMainThreadUsPerJob: number;
  /** All Redis threads (shared Redis: includes anything else it served meanwhile). */
  redisUsPerJob: number;
  redisMainThreadUsPerJob: number;
  /** The parent per completed request (HTTP phases only; raw BullMQ has no separate load generator). */
  loadGenUsPerRequest?: number;
  /** process + Redis + load generator, per job. */
  sumUsPerJob: number;
  /** Busy machine CPU that none of the above accounts for (kernel work charged to no process, other programs). */
  otherUsPerJob: number;
  /** Per command, most execution time first (see CpuTotals.redisCommands for what `usec` leaves out). */
  redisCommands: { name: string; callsPerJob: number; usPerJob: number }[];
  /** Average CPUs busy during the window, machine-wide. */
  busyCores: number;
  /** The process's event loop is one thread, so it allows at most 1e6 / its main-thread µs per job. */
  eventLoopCapJobsPerSec: number;
  /** Redis runs every command on one thread, so it alone allows at most 1e6 / its main-thread µs per job. */
  redisThreadCapJobsPerSec: number;
  /** The process, Redis and the load generator share `cores`, so together at most cores·1e6 / sum. */
  coresCapJobsPerSec: number;
}

export function cpuPerJob(m: Measurement, cores: number): CpuPerJob | undefined {
  const c = m.cpu;
  if (!c || m.jobs === 0) return undefined;
  const http = c.serverUs !== undefined;
  const processUs = http ? c.serverUs! : c.parentUs;
  const mainThreadUs = http ? c.serverMainThreadUs! : c.parentMainThreadUs;
  const loadGenUs = http ? c.parentUs : 0;
  const sum = processUs + c.redisUs + loadGenUs;
  const requests = Object.values(m.statusCodes ?? {}).reduce((a, b) => a + b, 0);
  return {
    processUsPerJob: processUs / m.jobs,
    processMainThreadUsPerJob: mainThreadUs / m.jobs,
    redisUsPerJob: c.redisUs / m.jobs,
    redisMainThreadUsPerJob: c.redisMainThreadUs / m.jobs,
    loadGenUsPerRequest: http ? loadGenUs / requests : undefined,
    sumUsPerJob: sum / m.jobs,
    otherUsPerJob: (c.machineBusyUs - sum) / m.jobs,
    redisCommands: Object.entries(c.redisCommands)
      .map(([name, { calls, usec }]) => ({ name, callsPerJob: calls / m.jobs, usPerJob: usec / m.jobs }))
      .filter((x) => x.callsPerJob >= 0.001)
      .sort((a, b) => b.usPerJob - a.usPerJob),
    busyCores: c.machineBusyUs / c.wallUs,
    eventLoopCapJobsPerSec: (1e6 * m.jobs) / mainThreadUs,
    redisThreadCapJobsPerSec: (1e6 * m.jobs) / c.redisMainThreadUs,
    coresCapJobsPerSec: (cores * 1e6 * m.jobs) / sum,
  };
}

export interface Budget {
  jobsPerSec: number;
  redisMainThreadUsPerJob: number;
  sumUsPerJob: number;
}

/** What `jobsPerSec` needs: at most this much Redis main-thread time, and this much CPU in all, per job. */
export function budgetFor(jobsPerSec: number, cores: number): Budget {
  return { jobsPerSec, redisMainThreadUsPerJob: 1e6 / jobsPerSec, sumUsPerJob: (cores * 1e6) / jobsPerSec };
}
