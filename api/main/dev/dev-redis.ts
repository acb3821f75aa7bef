import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { Redis } from 'ioredis';

/** True when something answers PING at `url` within a second. */
export async function redisAnswers(url: string): Promise<boolean> {
  const client = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 0, connectTimeout: 1000, retryStrategy: () => null, enableOfflineQueue: false });
  client.on('error', () => {});
  try {
    await client.connect();
    return (await client.ping()) === 'PONG';
  } catch {
    return false;
  } finally {
    client.disconnect();
  }
}

/**
 * The embedded default for `npm run dev`: a local redis-server child with its data (AOF)
 * under DATA_DIR/redis, stopped when the gateway exits.
 */
export async function startLocalRedis(dataDir: string, port = 6379): Promise<ChildProcess> {
  const dir = path.resolve(dataDir, 'redis');
  mkdirSync(dir, { recursive: true });
  const child = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--dir', dir, '--appendonly', 'yes', '--save', '', '--maxmemory-policy', 'noeviction'], {
    stdio: 'ignore',
  });
  const failed = new Promise<never>((_, reject) => {
    child.once('error', (err: NodeJS.ErrnoException) =>
      reject(
        new Error(
          err.code === 'ENOENT'
            ? 'nothing answers on 127.0.0.1:6379 and redis-server is not on PATH. Install Redis 7 (Debian/Ubuntu: apt-get install redis-server; macOS: brew install redis) or set REDIS_URL.'
            : `could not start redis-server: ${err.message}`,
        ),
      ),
    );
    child.once('exit', (code) => reject(new Error(`redis-server exited with code ${code}; is port ${port} taken?`)));
  });
  const url = `redis://127.0.0.1:${port}`;
  const ready = (async () => {
    for (let i = 0; i < 50; i++) {
      if (await redisAnswers(url)) return child;
      await new Promise((r) => setTimeout(r, 100));
    }
    throw new Error('redis-server did not answer within 5 s');
  })();
  const result = await Promise.race([ready, failed]);
  child.removeAllListeners('exit');
  return result;
}
