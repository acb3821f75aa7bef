import autocannon from 'autocannon';
import type { StartCpuWindow } from './cpu.js';
import type { Measurement } from './measurement.js';

export interface HttpLoad {
  name: string;
  url: string;
  body: string;
  headers: Record<string, string>;
  /** Status that counts as an accepted job. */
  acceptedStatus: number;
  connections: number;
}

function fire(load: HttpLoad, seconds: number): Promise<autocannon.Result> {
  return autocannon({
    url: load.url,
    method: 'POST',
    headers: { 'content-type': 'application/json', ...load.headers },
    body: load.body,
    connections: load.connections,
    // One request in flight per connection, as real clients do.
    pipelining: 1,
    duration: seconds,
  });
}

/** Runs an unmeasured warm-up, then the measured phase; counts only `acceptedStatus` as jobs. */
export async function measureHttp(load: HttpLoad, seconds: number, warmupSeconds: number, startCpu?: StartCpuWindow): Promise<Measurement> {
  if (warmupSeconds > 0) await fire(load, warmupSeconds);
  const stopCpu = await startCpu?.();
  const r = await fire(load, seconds);
  const cpu = await stopCpu?.();
  const statusCodes: Record<string, number> = {};
  for (const [code, { count }] of Object.entries(r.statusCodeStats ?? {})) statusCodes[code] = count ?? 0;
  const jobs = statusCodes[String(load.acceptedStatus)] ?? 0;
  const completed = Object.values(statusCodes).reduce((a, b) => a + b, 0);
  return {
    name: load.name,
    jobs,
    seconds: r.duration,
    jobsPerSec: jobs / r.duration,
    requestsPerSec: completed / r.duration,
    p50Ms: r.latency.p50,
    p99Ms: r.latency.p99,
    non2xx: r.non2xx,
    errors: r.errors,
    statusCodes,
    cpu,
  };
}
