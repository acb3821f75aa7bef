import { randomUUID } from 'node:crypto';
import { createHistogram } from 'node:perf_hooks';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import type { StartCpuWindow } from './cpu.js';
import { loopMeasurement, type Measurement } from './measurement.js';

export interface BullmqLoad {
  redisUrl: string;
  /** BullMQ key prefix, under the benchmark's own prefix so cleanup finds it. */
  prefix: string;
  concurrency: number;
}

/**
 * What the gateway's JobQueues.add does per run, without the HTTP and store work around it:
 * same queue naming, job options, payload shape, a unique jobId and a class priority.
 */
async function addLoop(queue: Queue, until: number, onAdded: (ns: number) => void, onError: () => void): Promise<void> {
  while (performance.now() < until) {
    const runId = `run_${randomUUID()}`;
    const started = process.hrtime.bigint();
    try {
      await queue.add(
        'inference:image:generate',
        { run_id: runId, account_id: 'acct_bench', kind: 'inference:image:generate', tier: 'open' },
        { jobId: runId, priority: 20 },
      );
      onAdded(Number(process.hrtime.bigint() - started));
    } catch {
      onError();
    }
  }
}

async function phase(queue: Queue, seconds: number, concurrency: number) {
  const latency = createHistogram();
  let jobs = 0;
  let errors = 0;
  const start = performance.now();
  const until = start + seconds * 1000;
  const loops = Array.from({ length: concurrency }, () =>
    addLoop(queue, until, (ns) => (jobs++, latency.record(Math.max(1, ns))), () => errors++),
  );
  await Promise.all(loops);
  return { jobs, errors, seconds: (performance.now() - start) / 1000, latency };
}

/** `concurrency` async loops calling `queue.add` back to back, in this process, on one connection. */
export async function measureBullmq(load: BullmqLoad, seconds: number, warmupSeconds: number, startCpu?: StartCpuWindow): Promise<Measurement> {
  const connection = new Redis(load.redisUrl, { maxRetriesPerRequest: 1 });
  const queue = new Queue('inference.image.generate.open', {
    connection,
    prefix: load.prefix,
    defaultJobOptions: { attempts: 3, removeOnComplete: { age: 24 * 3600, count: 1000 }, removeOnFail: { age: 7 * 24 * 3600, count: 5000 } },
  });
  try {
    if (warmupSeconds > 0) await phase(queue, warmupSeconds, load.concurrency);
    const stopCpu = await startCpu?.();
    const r = await phase(queue, seconds, load.concurrency);
    const cpu = await stopCpu?.();
    return loopMeasurement('raw BullMQ queue.add', r, cpu);
  } finally {
    await queue.close();
    connection.disconnect();
  }
}
