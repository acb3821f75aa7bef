import { randomUUID } from 'node:crypto';
import { createHistogram } from 'node:perf_hooks';
import { Queue, Worker } from 'bullmq';
import { Redis } from 'ioredis';
import type { StartCpuWindow } from './cpu.js';
import { loopMeasurement, type Measurement } from './measurement.js';

export interface BullmqCycleLoad {
  redisUrl: string;
  /** BullMQ key prefix, under the benchmark's own prefix so cleanup finds it. */
  prefix: string;
  concurrency: number;
}

const QUEUE = 'inference.image.generate.open';
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * One job's whole life in raw BullMQ, the way the gateway drives it (manual fetching, a token
 * per lease): `queue.add` with JobQueues' options, `worker.getNextJob(token, {block: false})`
 * (retried after 1 ms while the queue is empty; another loop may have taken "our" job, which is
 * fine: every loop takes one job per turn), then `job.moveToCompleted(result, token, false)`.
 */
async function cycleLoop(queue: Queue, worker: Worker, until: number, onDone: (ns: number) => void, onError: () => void): Promise<void> {
  while (performance.now() < until) {
    const runId = `run_${randomUUID()}`;
    const started = process.hrtime.bigint();
    try {
      await queue.add('inference:image:generate', { run_id: runId, account_id: 'acct_bench', kind: 'inference:image:generate', tier: 'open' }, { jobId: runId, priority: 20 });
      const token = randomUUID();
      let job = await worker.getNextJob(token, { block: false });
      for (let tries = 0; !job && tries < 1000; tries++) {
        await sleep(1);
        job = await worker.getNextJob(token, { block: false });
      }
      if (!job) throw new Error('no job to fetch');
      await job.moveToCompleted({ urls: ['http://bench/a.png'] }, token, false);
      onDone(Number(process.hrtime.bigint() - started));
    } catch {
      onError();
    }
  }
}

async function phase(queue: Queue, worker: Worker, seconds: number, concurrency: number) {
  const latency = createHistogram();
  let jobs = 0;
  let errors = 0;
  const start = performance.now();
  const until = start + seconds * 1000;
  await Promise.all(Array.from({ length: concurrency }, () => cycleLoop(queue, worker, until, (ns) => (jobs++, latency.record(Math.max(1, ns))), () => errors++)));
  return { jobs, errors, seconds: (performance.now() - start) / 1000, latency };
}

/** `concurrency` add -> getNextJob -> moveToCompleted loops in this process, on one connection. */
export async function measureBullmqCycle(load: BullmqCycleLoad, seconds: number, warmupSeconds: number, startCpu?: StartCpuWindow): Promise<Measurement> {
  const connection = new Redis(load.redisUrl, { maxRetriesPerRequest: null });
  const queue = new Queue(QUEUE, {
    connection,
    prefix: load.prefix,
    defaultJobOptions: { attempts: 3, removeOnComplete: { age: 24 * 3600, count: 1000 }, removeOnFail: { age: 7 * 24 * 3600, count: 5000 } },
  });
  const worker = new Worker(QUEUE, null, { connection, prefix: load.prefix, autorun: false, lockDuration: 30_000, maxStalledCount: 1_000_000 });
  worker.on('error', () => {});
  try {
    if (warmupSeconds > 0) await phase(queue, worker, warmupSeconds, load.concurrency);
    const stopCpu = await startCpu?.();
    const r = await phase(queue, worker, seconds, load.concurrency);
    const cpu = await stopCpu?.();
    return loopMeasurement('raw BullMQ cycle', r, cpu);
  } finally {
    await worker.close(true).catch(() => {});
    await queue.close();
    connection.disconnect();
  }
}
