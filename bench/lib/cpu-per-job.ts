import type { Measurement } from './measurement.js';

/** Where one phase's CPU went, per accepted job, and the throughput that CPU allows. */
export interface CpuPerJob {
  /** The server child; for raw BullMQ the parent, which runs the queue client and the load. */
  processUsPerJob: number;
  /** All Redis threads (shared Redis: includes anything else it served meanwhile). */
  redisUsPerJob: number;
  redisMainThreadUsPerJob: number;
  /** The parent per completed request (HTTP phases only; raw BullMQ has no separate load generator). */
  loadGenUsPerRequest?: number;
  /** process + Redis + load generator, per job. */
  sumUsPerJob: number;
  /** Busy machine CPU that none of the above accounts for (kernel work charged to no process, other programs). */
  otherUsPerJob: number;
  /** Average CPUs busy during the window, machine-wide. */
  busyCores: number;
  /** Redis runs every command on one thread, so it alone allows at most 1e6 / its µs per job. */
  redisThreadCapJobsPerSec: number;
  /** The process, Redis and the load generator share `cores`, so together at most cores·1e6 / sum. */
  coresCapJobsPerSec: number;
}

export function cpuPerJob(m: Measurement, cores: number): CpuPerJob | undefined {
  const c = m.cpu;
  if (!c || m.jobs === 0) return undefined;
  const http = c.serverUs !== undefined;
  const processUs = http ? c.serverUs! : c.parentUs;
  const loadGenUs = http ? c.parentUs : 0;
  const sum = processUs + c.redisUs + loadGenUs;
  const requests = Object.values(m.statusCodes ?? {}).reduce((a, b) => a + b, 0);
  return {
    processUsPerJob: processUs / m.jobs,
    redisUsPerJob: c.redisUs / m.jobs,
    redisMainThreadUsPerJob: c.redisMainThreadUs / m.jobs,
    loadGenUsPerRequest: http ? loadGenUs / requests : undefined,
    sumUsPerJob: sum / m.jobs,
    otherUsPerJob: (c.machineBusyUs - sum) / m.jobs,
    busyCores: c.machineBusyUs / c.wallUs,
    redisThreadCapJobsPerSec: (1e6 * m.jobs) / c.redisMainThreadUs,
    coresCapJobsPerSec: (cores * 1e6 * m.jobs) / sum,
  };
}

/** What `jobsPerSec` needs: at most this much Redis main-thread time, and this much CPU in all, per job. */
export function budgetFor(jobsPerSec: number, cores: number) {
  return { jobsPerSec, redisMainThreadUsPerJob: 1e6 / jobsPerSec, sumUsPerJob: (cores * 1e6) / jobsPerSec };
}
