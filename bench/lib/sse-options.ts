import { parseArgs } from 'node:util';

// The goals of docs/benchmarks.md, checked by the report.
export const GOAL_P99_MS = 100;
export const GOAL_KB_PER_STREAM = 20;
export const GOAL_RATIO = 0.5;

export interface SseOptions {
  connections: number;
  runs: number;
  rate: number;
  duration: number;
  maxDuration: number;
  warmup: number;
  window: number;
  clientProcesses: number;
  openConcurrency: number;
  json: boolean;
  profileDir?: string;
  heapSnapshotDir?: string;
}

export function parseSseOptions(args: string[]): SseOptions {
  const { values } = parseArgs({
    args,
    options: {
      connections: { type: 'string', default: '10000' },
      runs: { type: 'string', default: '1000' },
      rate: { type: 'string', default: '1000' },
      duration: { type: 'string', default: '10' },
      'max-duration': { type: 'string', default: '5' },
      warmup: { type: 'string', default: '2' },
      window: { type: 'string', default: '20000' },
      'client-processes': { type: 'string', default: '1' },
      'open-concurrency': { type: 'string', default: '100' },
      json: { type: 'boolean', default: false },
      profile: { type: 'string' },
      'heap-snapshot': { type: 'string' },
    },
  });
  const num = (name: string, text: string, min: number) => {
    const n = Number(text);
    if (text.trim() === '' || !Number.isFinite(n) || n < min) throw new Error(`--${name} must be a number >= ${min} (got ${JSON.stringify(text)})`);
    return n;
  };
  const o: SseOptions = {
    connections: Math.round(num('connections', values.connections, 1)),
    runs: Math.round(num('runs', values.runs, 1)),
    rate: num('rate', values.rate, 1),
    duration: num('duration', values.duration, 1),
    maxDuration: num('max-duration', values['max-duration'], 1),
    warmup: num('warmup', values.warmup, 0),
    window: Math.round(num('window', values.window, 1)),
    clientProcesses: Math.round(num('client-processes', values['client-processes'], 1)),
    openConcurrency: Math.round(num('open-concurrency', values['open-concurrency'], 1)),
    json: values.json,
    profileDir: values.profile ?? process.env.BENCH_PROFILE_DIR,
    heapSnapshotDir: values['heap-snapshot'],
  };
  if (o.runs > o.connections) throw new Error('--runs must not exceed --connections (every run needs a stream)');
  return o;
}

