import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { freePort } from './ports.js';


/** One PING; true only for +PONG (a server still loading its AOF answers -LOADING). */
function pong(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    let reply = '';
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(1_000, () => done(false));
    socket.on('error', () => done(false));
    socket.on('connect', () => socket.write('PING\r\n'));
    socket.on('data', (d) => {
      reply += d.toString('utf8');
      if (reply.includes('\r\n')) done(reply.startsWith('+PONG'));
    });
  });
}

/**
 * A private redis-server for fault injection: its own port and directory, every write in
 * its append-only file before it is answered, so a SIGKILL loses nothing it acknowledged and
 * a restart brings back exactly that state.
 */
export class RedisServerProcess {
  private child: ChildProcess | null = null;

  private constructor(private readonly bin: string, readonly port: number, readonly dir: string, private readonly extraArgs: string[]) {}

  /** `extraArgs` go to redis-server as they are (`['--replicaof', '127.0.0.1', port]` makes a replica). */
  static async start(bin: string, extraArgs: string[] = []): Promise<RedisServerProcess> {
    const server = new RedisServerProcess(bin, await freePort(), mkdtempSync(path.join(os.tmpdir(), 'switchyard-redis-')), extraArgs);
    await server.restart();
    return server;
  }

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  get running(): boolean {
    return this.child !== null;
  }

  /** Starts the server (again) on its port and directory and waits until it answers, its AOF loaded. */
  async restart(): Promise<void> {
    if (this.child) throw new Error('redis-server is already running');
    const args = ['--port', String(this.port), '--bind', '127.0.0.1', '--appendonly', 'yes', '--appendfsync', 'always', '--dir', this.dir, '--save', '', ...this.extraArgs];
    const child = spawn(this.bin, args, { stdio: 'ignore' });
    this.child = child;
    child.once('exit', () => {
      if (this.child === child) this.child = null;
    });
    const deadline = Date.now() + 10_000;
    while (!(await pong(this.port))) {
      if (!this.child) throw new Error(`redis-server exited at start (port ${this.port})`);
      if (Date.now() > deadline) throw new Error(`redis-server did not answer on port ${this.port}`);
      await new Promise((r) => setTimeout(r, 20));
    }
  }

  /** Sends a signal that does not end it (SIGSTOP/SIGCONT: a server frozen, then thawed). */
  signal(signal: 'SIGSTOP' | 'SIGCONT'): void {
    if (!this.child) throw new Error('redis-server is not running');
    this.child.kill(signal);
  }

  /** SIGKILL, as a crash: resolves once the process is gone. */
  async kill(): Promise<void> {
    const child = this.child;
    if (!child) return;
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    child.kill('SIGKILL');
    await exited;
  }

  async stop(): Promise<void> {
    await this.kill();
    rmSync(this.dir, { recursive: true, force: true });
  }
}
