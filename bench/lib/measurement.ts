import type { RecordableHistogram } from 'node:perf_hooks';
import type { CpuTotals } from './cpu.js';

/** One measured phase, whatever produced the load. */
export interface Measurement {
  name: string;
  /** Accepted jobs: 202 responses for HTTP phases, resolved `queue.add` calls for raw BullMQ. */
  jobs: number;
  /** Wall-clock seconds the phase actually ran. */
  seconds: number;
  jobsPerSec: number;
  /** All completed requests per second, whatever their status (HTTP phases only). */
  requestsPerSec?: number;
  p50Ms: number;
  p99Ms: number;
  /** Responses other than 2xx (HTTP phases only). */
  non2xx: number;
  /** Connection errors and timeouts, or rejected `queue.add` calls. */
  errors: number;
  /** Count per HTTP status, so a run full of 401s or 500s is visible at once. */
  statusCodes?: Record<string, number>;
  /** CPU used over the measured window only (warm-up excluded), when a meter was given. */
  cpu?: CpuTotals;
}

/** What an in-process loop phase (raw BullMQ) counts: jobs, errors, time and a latency histogram in ns. */
export interface LoopResult {
  jobs: number;
  errors: number;
  seconds: number;
  latency: RecordableHistogram;
}

export function loopMeasurement(name: string, r: LoopResult, cpu?: CpuTotals): Measurement {
  return {
    name,
    jobs: r.jobs,
    seconds: r.seconds,
    jobsPerSec: r.jobs / r.seconds,
    p50Ms: r.latency.percentile(50) / 1e6,
    p99Ms: r.latency.percentile(99) / 1e6,
    non2xx: 0,
    errors: r.errors,
    cpu,
  };
}
