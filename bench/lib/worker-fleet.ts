import { spawn } from 'node:child_process';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { stopChild } from './child-server.js';

const script = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'servers', 'worker-fleet.ts');

export interface FleetEvents {
  /** `lease` event in the worker process; `at` is wall-clock ms (timeOrigin + now) there. */
  onLease?: (runId: string, at: number) => void;
  /** The gateway acknowledged `complete`: the run record is `succeeded`. */
  onCompleted?: (runId: string, at: number) => void;
  onFailed?: (runId: string, why: string) => void;
}

export interface WorkerFleet {
  pid: number;
  events: FleetEvents;
  stop(): Promise<void>;
}

/** Starts bench/servers/worker-fleet.ts and resolves once all its workers are registered. */
export async function startWorkerFleet(env: { gateway: string; token: string; workers: number; slots: number }): Promise<WorkerFleet> {
  const child = spawn(process.execPath, ['--import', 'tsx', script], {
    env: { ...process.env, GATEWAY_URL: env.gateway, WORKER_TOKEN: env.token, WORKERS: String(env.workers), SLOTS: String(env.slots) },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const fleet: WorkerFleet = {
    pid: child.pid!,
    events: {},
    stop: () => stopChild(child),
  };
  const lines = createInterface({ input: child.stdout! });
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error('worker-fleet: not ready within 30 s'));
    }, 30_000);
    const onExit = (code: number | null) => {
      clearTimeout(timer);
      reject(new Error(`worker-fleet: exited before ready (code ${code})`));
    };
    child.once('exit', onExit);
    lines.once('line', (line) => {
      clearTimeout(timer);
      child.off('exit', onExit);
      if (line.includes('"ready"')) resolve();
      else reject(new Error(`worker-fleet: printed ${JSON.stringify(line)} instead of ready`));
    });
  });
  lines.on('line', (line) => {
    const [type, runId, rest] = line.split(' ');
    if (type === 'l') fleet.events.onLease?.(runId, Number(rest));
    else if (type === 'c') fleet.events.onCompleted?.(runId, Number(rest));
    else if (type === 'f') fleet.events.onFailed?.(runId, rest);
  });
  return fleet;
}
