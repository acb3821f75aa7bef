import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import type { Context } from 'mocha';
import { REDIS_CLI, REDIS_SERVER, requireProgram } from './optional-program.js';
import { freePort } from './ports.js';

const run = promisify(execFile);

/** One node of the cluster: its client port and the process serving it. */
export interface ClusterNode {
  port: number;
  child: ChildProcess;
}

/**
 * A real Redis Cluster of private redis-server processes on loopback: 3 primaries, each with one
 * replica (Redis's own minimum for a cluster that survives a primary's loss), made the way an
 * operator makes one, with `redis-cli --cluster create`. Each node has its own directory under
 * one temporary directory, its own client port and an explicit cluster bus port (the default,
 * port + 10000, may be taken or above 65535 for the ephemeral ports the OS hands out).
 */
export class RedisCluster {
  private constructor(
    private readonly cli: string,
    readonly dir: string,
    readonly nodes: ClusterNode[],
  ) {}

  /** `host:port` of every node, primaries and replicas: what REDIS_CLUSTER_NODES takes. */
  get nodeList(): string[] {
    return this.nodes.map((n) => `127.0.0.1:${n.port}`);
  }

  /** REDIS_CLUSTER_NODES's value for this cluster. */
  get setting(): string {
    return this.nodeList.join(',');
  }

  /**
   * Starts `primaries * (1 + replicasEach)` nodes, joins them into a cluster and resolves once
   * every node reports `cluster_state:ok` and agrees on all 16384 slots being served. `announce`
   * gives the port a node tells clients to reach it on (CLUSTER SLOTS, MOVED), e.g. a proxy's in
   * front of it; the nodes' bus links go direct.
   */
  static async start(bins: { server: string; cli: string }, opts: { primaries?: number; replicasEach?: number; announce?: (port: number) => Promise<number> } = {}): Promise<RedisCluster> {
    const primaries = opts.primaries ?? 3;
    const replicasEach = opts.replicasEach ?? 1;
    const dir = mkdtempSync(path.join(os.tmpdir(), 'switchyard-redis-cluster-'));
    const nodes: ClusterNode[] = [];
    const cluster = new RedisCluster(bins.cli, dir, nodes);
    try {
      const used = new Set<number>();
      const port = async (): Promise<number> => {
        for (;;) {
          const p = await freePort();
          if (!used.has(p)) return used.add(p), p;
        }
      };
      for (let i = 0; i < primaries * (1 + replicasEach); i++) {
        const [client, bus] = [await port(), await port()];
        const nodeDir = path.join(dir, String(client));
        mkdirSync(nodeDir);
        const args = [
          '--port', String(client), '--cluster-port', String(bus), '--bind', '127.0.0.1', '--dir', nodeDir,
          '--cluster-enabled', 'yes', '--cluster-config-file', 'nodes.conf', '--cluster-node-timeout', '2000',
          // Tests want speed, not durability: no AOF, no RDB snapshots.
          '--appendonly', 'no', '--save', '',
          // A replica's first sync starts at once (Redis waits 5 s for more replicas by default).
          '--repl-diskless-sync-delay', '0',
          ...(opts.announce ? ['--cluster-announce-ip', '127.0.0.1', '--cluster-announce-port', String(await opts.announce(client)), '--cluster-announce-bus-port', String(bus)] : []),
        ];
        const child = spawn(bins.server, args, { stdio: 'ignore' });
        nodes.push({ port: client, child });
      }
      await cluster.forming(async () => (await Promise.all(nodes.map((n) => cluster.ask(n.port, 'PING')))).every((r) => r === 'PONG'), 'every node to answer PING');
      await run(bins.cli, ['--cluster', 'create', ...cluster.nodeList, '--cluster-replicas', String(replicasEach), '--cluster-yes'], { timeout: 30_000 });
      await cluster.forming(() => cluster.allOk(), 'cluster_state:ok on every node');
      // A replica that has not synced with its primary yet would not take its place (its data
      // too old to be elected), so the cluster is ready only once every replica is in sync.
      await cluster.forming(async () => (await cluster.replicasInSync()) === primaries * replicasEach, 'every replica in sync with its primary');
      return cluster;
    } catch (err) {
      await cluster.stop();
      throw err;
    }
  }

  /** One command through redis-cli to a node; its reply's text, or '' where the node does not answer. */
  async ask(port: number, ...command: string[]): Promise<string> {
    try {
      const { stdout } = await run(this.cli, ['-h', '127.0.0.1', '-p', String(port), ...command], { timeout: 5_000 });
      return stdout.trim();
    } catch {
      return '';
    }
  }

  /** Whether every node says the cluster is up with every slot assigned and served. */
  async allOk(): Promise<boolean> {
    const infos = await Promise.all(this.nodes.map((n) => this.ask(n.port, 'CLUSTER', 'INFO')));
    return infos.every((info) => /cluster_state:ok/.test(info) && /cluster_slots_ok:16384/.test(info) && /cluster_known_nodes:(\d+)/.exec(info)?.[1] === String(this.nodes.length));
  }

  /** How many nodes are replicas whose link to their primary is up. */
  async replicasInSync(): Promise<number> {
    const infos = await Promise.all(this.nodes.map((n) => this.ask(n.port, 'INFO', 'replication')));
    return infos.filter((info) => /role:slave/.test(info) && /master_link_status:up/.test(info)).length;
  }

  /** Whether every node still running says the cluster is up with every slot served (after a failover, say). */
  async liveOk(): Promise<boolean> {
    const live = this.nodes.filter((n) => n.child.exitCode === null && n.child.signalCode === null);
    const infos = await Promise.all(live.map((n) => this.ask(n.port, 'CLUSTER', 'INFO')));
    return infos.every((info) => /cluster_state:ok/.test(info) && /cluster_slots_ok:16384/.test(info));
  }

  /** The port of the primary serving `key`'s slot now, as the node on `via` sees it. */
  async primaryOf(key: string, via = this.nodes[0]!.port): Promise<number> {
    const slot = Number(await this.ask(via, 'CLUSTER', 'KEYSLOT', key));
    // CLUSTER SHARDS is Redis 7's; CLUSTER SLOTS answers on every version: start end host port id ...
    const lines = (await this.ask(via, 'CLUSTER', 'SLOTS')).split('\n');
    for (let i = 0; i + 3 < lines.length; i++) {
      const [start, end, , port] = lines.slice(i, i + 4);
      if (/^\d+$/.test(start!) && /^\d+$/.test(end!) && Number(start) <= slot && slot <= Number(end) && /^\d+$/.test(port!)) return Number(port);
    }
    throw new Error(`no primary found for slot ${slot}`);
  }

  /** SIGKILLs the node on `port`, as a crash; resolves once it is gone. */
  async kill(port: number): Promise<void> {
    const node = this.nodes.find((n) => n.port === port);
    if (!node) throw new Error(`no node on port ${port}`);
    if (node.child.exitCode !== null || node.child.signalCode !== null) return;
    const exited = once(node.child, 'exit');
    node.child.kill('SIGKILL');
    await exited;
  }

  /** Waits until `check` holds (polled; a deadline, not a timing assertion). */
  async until(check: () => Promise<boolean>, what: string, timeoutMs = 30_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!(await check())) {
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  /** The ports of the nodes that are primaries now. */
  async primaries(): Promise<number[]> {
    const roles = await Promise.all(this.nodes.map(async (n) => ((await this.ask(n.port, 'ROLE')).split('\n')[0] === 'master' ? n.port : 0)));
    return roles.filter((p) => p !== 0);
  }

  private async forming(check: () => Promise<boolean>, what: string, timeoutMs = 30_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!(await check())) {
      if (this.nodes.some((n) => n.child.exitCode !== null || n.child.signalCode !== null)) throw new Error(`a redis-server of the cluster exited while waiting for ${what}`);
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  /**
   * Lets the process exit with the nodes still running (a cluster shared by a whole test run),
   * and kills them, synchronously, when it does.
   */
  unrefUntilExit(): void {
    for (const n of this.nodes) n.child.unref();
    process.once('exit', () => {
      for (const n of this.nodes) if (n.child.exitCode === null && n.child.signalCode === null) n.child.kill('SIGKILL');
      rmSync(this.dir, { recursive: true, force: true });
    });
  }

  /** Kills every node and removes their directories. */
  async stop(): Promise<void> {
    await Promise.all(
      this.nodes.map(async (n) => {
        if (n.child.exitCode !== null || n.child.signalCode !== null) return;
        const exited = once(n.child, 'exit');
        n.child.kill('SIGKILL');
        await exited;
      }),
    );
    rmSync(this.dir, { recursive: true, force: true });
  }
}

let shared: Promise<RedisCluster> | undefined;

/**
 * One cluster for every test file of a run that wants one (the store contract's cluster target),
 * started on first use and ended with the process: a cluster takes seconds to form.
 */
export function sharedCluster(bins: { server: string; cli: string }): Promise<RedisCluster> {
  shared ??= RedisCluster.start(bins).then((cluster) => {
    cluster.unrefUntilExit();
    return cluster;
  });
  return shared;
}

/**
 * For a `before` hook (mocha's `this`): REDIS_CLUSTER_NODES of the cluster a test runs on: the
 * run's own (`npm run test:cluster`), else the shared one of this process, started on first use;
 * pending with the install command (failing under CI=true) without redis-server or redis-cli.
 */
export async function clusterNodes(ctx: Context): Promise<string> {
  if (process.env.REDIS_CLUSTER_NODES) return process.env.REDIS_CLUSTER_NODES;
  const bins = { server: requireProgram(ctx, REDIS_SERVER), cli: requireProgram(ctx, REDIS_CLI) };
  ctx.timeout(Math.max(ctx.timeout(), 60_000));
  return (await sharedCluster(bins)).setting;
}
