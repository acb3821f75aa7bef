/**
 * Where the gateway's Redis is: one server (`redis://` or `rediss://` URL) or a Redis Cluster,
 * given as REDIS_CLUSTER_NODES (`host:port,host:port`) or as a `redis+cluster://` (TLS:
 * `rediss+cluster://`) REDIS_URL naming the nodes the same way, with the nodes' user and
 * password in the URL's userinfo. The nodes are only where the client starts: it learns the
 * rest of the cluster (every primary and replica) from them with CLUSTER SLOTS.
 */
export type RedisTarget = { kind: 'single'; url: string } | { kind: 'cluster'; nodes: RedisNode[]; username?: string; password?: string; tls: boolean };

export interface RedisNode {
  host: string;
  port: number;
}

export const CLUSTER_URL = /^rediss?\+cluster:\/\//;

/** The nodes of a `host:port,host:port` list, or the problem with it. */
export function parseNodes(list: string): RedisNode[] | string {
  const items = list.split(',').map((x) => x.trim()).filter(Boolean);
  if (items.length === 0) return 'names no node (host:port,host:port)';
  const nodes: RedisNode[] = [];
  for (const item of items) {
    // `[::1]:7000` for IPv6, `host:7000` otherwise.
    const m = /^(?:\[([0-9a-fA-F:.]+)\]|([A-Za-z0-9_.-]+)):(\d{1,5})$/.exec(item);
    const port = m ? Number(m[3]) : 0;
    if (!m || port < 1 || port > 65535) return `has ${JSON.stringify(item)}, not host:port`;
    nodes.push({ host: m[1] ?? m[2]!, port });
  }
  return nodes;
}

/**
 * The target REDIS_URL and REDIS_CLUSTER_NODES name together, or the problem with them:
 * REDIS_CLUSTER_NODES wins over a plain REDIS_URL (whose user, password and TLS it keeps), and
 * cannot be given with a `redis+cluster://` one, which would name the nodes twice.
 */
export function parseRedisTarget(url: string, clusterNodes?: string): RedisTarget | string {
  const cluster = CLUSTER_URL.test(url);
  if (cluster && clusterNodes) return 'give the cluster nodes either as REDIS_CLUSTER_NODES or in a redis+cluster:// REDIS_URL, not both';
  if (!cluster && !clusterNodes) return { kind: 'single', url };
  // The node list is not a URL's host, so the userinfo is split off by hand.
  const rest = cluster ? url.replace(CLUSTER_URL, '') : '';
  const at = rest.lastIndexOf('@');
  const [userinfo, hosts] = cluster ? (at >= 0 ? [rest.slice(0, at), rest.slice(at + 1)] : ['', rest]) : [userinfoOf(url), clusterNodes!];
  const nodes = parseNodes(hosts.replace(/\/.*$/, ''));
  if (typeof nodes === 'string') return `${cluster ? 'REDIS_URL' : 'REDIS_CLUSTER_NODES'} ${nodes}`;
  if (cluster && /\/\d*[1-9]/.test(hosts)) return 'a Redis Cluster has only database 0; drop the /db of the redis+cluster:// REDIS_URL';
  const colon = userinfo.indexOf(':');
  const username = decodeURIComponent(colon >= 0 ? userinfo.slice(0, colon) : userinfo);
  const password = colon >= 0 ? decodeURIComponent(userinfo.slice(colon + 1)) : undefined;
  return {
    kind: 'cluster',
    nodes,
    ...(username && { username }),
    ...(password !== undefined && { password }),
    tls: /^rediss/.test(url),
  };
}

function userinfoOf(url: string): string {
  try {
    const u = new URL(url);
    return u.username || u.password ? `${u.username}:${u.password}` : '';
  } catch {
    return '';
  }
}

/** A target given as text, for callers outside the config (tools, tests): throws on a bad one. */
export function redisTarget(url: string, clusterNodes?: string): RedisTarget {
  const target = parseRedisTarget(url, clusterNodes);
  if (typeof target === 'string') throw new Error(target);
  return target;
}
