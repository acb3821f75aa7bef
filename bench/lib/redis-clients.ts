import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import type { Redis } from 'ioredis';

/** The Redis connections of one process, as Redis sees them (CLIENT LIST). */
export interface ProcessRedisClients {
  count: number;
  /** Connection name (`switchyard:api`...) -> how many; `(unnamed)` for none. */
  byName: Record<string, number>;
  /** Every client connected to this Redis, whoever it belongs to (the Redis is shared). */
  serverTotal: number;
}

/** Local TCP ports of `pid`'s sockets: its fds' socket inodes looked up in its /proc/net/tcp{,6}. */
function localPorts(pid: number): Set<number> {
  const inodes = new Set<string>();
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    try {
      const m = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`));
      if (m) inodes.add(m[1]);
    } catch {
      // closed meanwhile
    }
  }
  const ports = new Set<number>();
  for (const table of ['tcp', 'tcp6']) {
    let text = '';
    try {
      text = readFileSync(`/proc/${pid}/net/${table}`, 'utf8');
    } catch {
      continue;
    }
    // sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
    for (const line of text.split('\n').slice(1)) {
      const f = line.trim().split(/\s+/);
      if (f.length > 9 && inodes.has(f[9])) ports.add(parseInt(f[1].split(':')[1], 16));
    }
  }
  return ports;
}

/**
 * Which of the clients Redis lists are `pid`'s: those whose address port is one of the
 * process's local socket ports (Redis and the process on one machine). Connection names alone
 * would not do: every gateway on a shared Redis names its connections alike.
 */
export async function redisClientsOf(redis: Redis, pid: number): Promise<ProcessRedisClients> {
  const list = (await redis.call('CLIENT', 'LIST')) as string;
  const ports = localPorts(pid);
  const byName: Record<string, number> = {};
  let count = 0;
  let serverTotal = 0;
  for (const line of list.split('\n')) {
    const addr = /(?:^| )addr=(\S+)/.exec(line)?.[1];
    if (!addr) continue;
    serverTotal++;
    if (!ports.has(Number(addr.slice(addr.lastIndexOf(':') + 1)))) continue;
    count++;
    const name = /(?:^| )name=(\S*)/.exec(line)?.[1] || '(unnamed)';
    byName[name] = (byName[name] ?? 0) + 1;
  }
  return { count, byName, serverTotal };
}
