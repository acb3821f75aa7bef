import { parseArgs } from 'node:util';

export interface LoadOptions {
  /** Seconds measured per phase. */
  duration: number;
  /** Concurrent HTTP connections, and concurrent add loops for raw BullMQ. */
  connections: number;
  /** Seconds of unmeasured load before each phase (JIT, connection pools, key cache). */
  warmup: number;
  /** Print one JSON object instead of the table. */
  json: boolean;
  /** Write a V8 CPU profile of each server child into this directory. */
  profileDir?: string;
}

/** `text` as a number of at least `min`, or an error naming the option `--<name>`. */
export function number(name: string, text: string, min: number): number {
  const n = Number(text);
  if (text.trim() === '' || !Number.isFinite(n) || n < min) throw new Error(`--${name} must be a number >= ${min} (got ${JSON.stringify(text)})`);
  return n;
}

export function parseLoadOptions(args: string[]): LoadOptions {
  const { values } = parseArgs({
    args,
    options: {
      duration: { type: 'string', default: '10' },
      connections: { type: 'string', default: '64' },
      warmup: { type: 'string', default: '2' },
      json: { type: 'boolean', default: false },
      profile: { type: 'string' },
    },
  });
  return {
    duration: number('duration', values.duration, 1),
    connections: Math.round(number('connections', values.connections, 1)),
    warmup: number('warmup', values.warmup, 0),
    json: values.json,
    profileDir: values.profile,
  };
}
