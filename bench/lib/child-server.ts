import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

const serversDir = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'servers');

export interface ChildServer {
  url: string;
  /** The Node process itself (spawned directly, no shell), so /proc/<pid>/stat is the server's CPU. */
  pid: number;
  /** SIGTERM, then wait for exit (the server stops cleanly, which also flushes a CPU profile). */
  stop(): Promise<void>;
}

/**
 * Starts bench/servers/<script> in its own Node process, so the load generator in this process
 * never shares an event loop with the server it measures. The script prints `{"url": ...}` as
 * its first stdout line once it listens; its stderr passes through.
 */
export async function startChildServer(script: string, env: Record<string, string>, profileDir?: string): Promise<ChildServer> {
  const nodeArgs = ['--import', 'tsx'];
  if (profileDir) nodeArgs.push('--cpu-prof', `--cpu-prof-dir=${profileDir}`);
  const child = spawn(process.execPath, [...nodeArgs, path.join(serversDir, script)], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const url = await readUrl(child, script);
  return {
    url,
    pid: child.pid!,
    stop: () => stopChild(child),
  };
}

/** SIGTERM, then SIGKILL if the child has not exited within 10 s. */
export async function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = once(child, 'exit');
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
  await exited;
  clearTimeout(timer);
}

export function readUrl(child: ChildProcess, script: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const lines = createInterface({ input: child.stdout! });
    const fail = (why: string) => {
      lines.close();
      reject(new Error(`${script}: ${why}`));
    };
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      fail('did not print its URL within 30 s');
    }, 30_000);
    const onExit = (code: number | null, signal: string | null) => {
      clearTimeout(timer);
      fail(`exited before listening (code ${code}, signal ${signal})`);
    };
    child.once('exit', onExit);
    // Log lines (the gateway's start-up warnings) may come first: the URL is the line that has one.
    // Every line is read, so a chatty child never blocks on a full pipe.
    let found = false;
    lines.on('line', (line) => {
      if (found) return;
      let url: unknown;
      try {
        url = (JSON.parse(line) as { url?: unknown }).url;
      } catch {
        url = undefined;
      }
      if (typeof url !== 'string') return;
      found = true;
      clearTimeout(timer);
      child.off('exit', onExit);
      resolve(url);
    });
  });
}
