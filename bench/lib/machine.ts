import os from 'node:os';
import { Redis } from 'ioredis';

export interface Machine {
  cpus: number;
  cpuModel: string;
  node: string;
  redis: string;
}

/** What the figures depend on, printed with them so a reader can compare runs. */
export async function describeMachine(redisUrl: string): Promise<Machine> {
  const redis = new Redis(redisUrl);
  try {
    const info = await redis.info('server');
    return {
      cpus: os.availableParallelism(),
      cpuModel: os.cpus()[0]?.model.trim() ?? 'unknown',
      node: process.version,
      redis: /redis_version:(\S+)/.exec(info)?.[1] ?? 'unknown',
    };
  } finally {
    redis.disconnect();
  }
}
