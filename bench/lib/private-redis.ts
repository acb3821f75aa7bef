import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import net from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';

export interface PrivateRedis {
  url: string;
  pid: number;
  stop(): Promise<void>;
}

/** A port nothing listens on now (closed again at once: the caller binds it). */
export async function freePort(): Promise<number> {
  const server = net.createServer().listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as net.AddressInfo;
  server.close();
  await once(server, 'close');
  return port;
}

/**
 * A redis-server of the benchmark's own (no persistence, its own port), so that counting its
 * commands counts the measured gateways' and nothing else: the shared Redis on 6379 serves
 * other tests and sessions meanwhile. `bin` is redis-server from PATH unless given.
 */
export async function startPrivateRedis(bin = 'redis-server'): Promise<PrivateRedis> {
  const port = await freePort();
  const child: ChildProcess = spawn(bin, ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--maxclients', '20000'], { stdio: 'ignore' });
  const failed = new Promise<never>((_, reject) => {
    child.once('error', (err) => reject(new Error(`could not start ${bin} (install it: apt-get install redis-server): ${err.message}`)));
    child.once('exit', (code) => reject(new Error(`${bin} exited at start (code ${code})`)));
  });
  failed.catch(() => {});
  const url = `redis://127.0.0.1:${port}`;
  const deadline = Date.now() + 10_000;
  for (;;) {
    const probe = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
    probe.on('error', () => {}); // not listening yet: the connect's rejection says so
    try {
      await Promise.race([probe.connect().then(() => probe.ping()), failed]);
      break;
    } catch (err) {
      if (child.exitCode !== null || Date.now() > deadline) throw err;
      await sleep(50);
    } finally {
      probe.disconnect();
    }
  }
  return {
    url,
    pid: child.pid!,
    stop: async () => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = once(child, 'exit');
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 5_000);
      await exited;
      clearTimeout(timer);
    },
  };
}
