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

export interface FleetOptions {
  gateway: string;
  token: string;
  workers: number;
  slots: number;
  /** @defaultValue 'inference:image:generate' */
  kind?: string;
  /** Distinct models: worker i advertises `modelId(i % models)`. @defaultValue 0, the kind's default model only */
  models?: number;
  /** `noop` completes at once with no artifact (inference:llm:text-generate); `words` streams `max_tokens` words; `openai` relays `backendUrl` (bench/servers/worker-fleet.ts). @defaultValue 'demo' */
  handler?: 'demo' | 'noop' | 'words' | 'openai';
  /** The OpenAI base URL the `openai` handler relays. */
  backendUrl?: string;
  /** Write a V8 CPU profile of the fleet's process into this directory (written when it stops). */
  profileDir?: string;
}

/** The id of the i-th model of a fleet started with `models`: `m-000`, `m-001`, ... */
export const modelId = (i: number) => `m-${String(i).padStart(3, '0')}`;

/** Starts bench/servers/worker-fleet.ts and resolves once all its workers are registered. */
export async function startWorkerFleet(o: FleetOptions): Promise<WorkerFleet> {
  const env: Record<string, string> = { GATEWAY_URL: o.gateway, WORKER_TOKEN: o.token, WORKERS: String(o.workers), SLOTS: String(o.slots), MODELS: String(o.models ?? 0), HANDLER: o.handler ?? 'demo' };
  if (o.kind) env.KIND = o.kind;
  if (o.backendUrl) env.BACKEND_URL = o.backendUrl;
  const nodeArgs = ['--import', 'tsx'];
  if (o.profileDir) nodeArgs.push('--cpu-prof', `--cpu-prof-dir=${o.profileDir}`);
  const child = spawn(process.execPath, [...nodeArgs, script], {
    env: { ...process.env, ...env },
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
      reject(new Error('worker-fleet: not ready within 60 s'));
    }, 60_000);
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
