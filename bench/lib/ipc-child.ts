import { spawn } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { readUrl, stopChild } from './child-server.js';

const benchDir = path.join(path.dirname(fileURLToPath(import.meta.url)), '..');

/** A request over the IPC channel: `type` picks the handler, `id` pairs it with its reply. */
interface IpcRequest {
  type: string;
  id: number;
  [k: string]: unknown;
}

export interface IpcChild {
  pid: number;
  /** From the child's `{"url": ...}` stdout line (servers only); log lines before it are skipped. */
  url: string;
  /** Sends `{type, ...body}`; resolves with the child's answer (rejects on its error or timeout). */
  request<T>(type: string, body?: Record<string, unknown>, timeoutMs?: number): Promise<T>;
  stop(): Promise<void>;
}

export interface IpcChildOptions {
  env?: Record<string, string>;
  /** Node options placed before the script (e.g. `--expose-gc`, `--import <module>`). */
  nodeArgs?: string[];
  /** Wait for the `{"url": ...}` line the servers print once they listen. */
  printsUrl?: boolean;
  /** Write a V8 CPU profile of the child into this directory. */
  profileDir?: string;
}

/**
 * Starts bench/<script> in its own Node process with an IPC channel (advanced serialization,
 * so typed arrays cross as they are). Unlike startChildServer, the parent can ask the child
 * things while it runs: its memory after a GC, the latencies it recorded.
 */
export async function startIpcChild(script: string, opts: IpcChildOptions = {}): Promise<IpcChild> {
  const nodeArgs = ['--import', 'tsx', ...(opts.nodeArgs ?? [])];
  if (opts.profileDir) nodeArgs.push('--cpu-prof', `--cpu-prof-dir=${opts.profileDir}`);
  const child = spawn(process.execPath, [...nodeArgs, path.join(benchDir, script)], {
    env: { ...process.env, ...opts.env },
    stdio: ['ignore', 'pipe', 'inherit', 'ipc'],
    serialization: 'advanced',
  });
  const pending = new Map<number, { resolve: (v: never) => void; reject: (e: Error) => void }>();
  let nextId = 1;
  child.on('message', (m: { id: number; error?: string }) => {
    const p = pending.get(m.id);
    if (!p) return;
    pending.delete(m.id);
    if (m.error) p.reject(new Error(`${script}: ${m.error}`));
    else p.resolve(m as never);
  });
  child.once('exit', (code, signal) => {
    for (const p of pending.values()) p.reject(new Error(`${script} exited (code ${code}, signal ${signal})`));
    pending.clear();
  });
  const url = opts.printsUrl ? await readUrl(child, script) : '';
  if (!opts.printsUrl) child.stdout!.resume();
  return {
    pid: child.pid!,
    url,
    request<T>(type: string, body: Record<string, unknown> = {}, timeoutMs = 120_000): Promise<T> {
      const id = nextId++;
      return new Promise<T>((resolve, reject) => {
        const timer = setTimeout(() => {
          pending.delete(id);
          reject(new Error(`${script}: no answer to ${type} within ${timeoutMs} ms`));
        }, timeoutMs);
        const settle = <A extends unknown[]>(f: (...a: A) => void) => (...a: A) => (clearTimeout(timer), f(...a));
        pending.set(id, { resolve: settle(resolve) as never, reject: settle(reject) });
        child.send({ ...body, type, id } satisfies IpcRequest);
      });
    },
    stop: () => stopChild(child),
  };
}


/**
 * Child side: answers the parent's requests of the given types. Handlers return the reply's
 * fields; a throw is sent back as `error`. Other types are left to other listeners.
 */
export function answerRequests(handlers: Record<string, (req: IpcRequest) => unknown>): void {
  process.on('message', (req: IpcRequest) => {
    const handler = handlers[req?.type];
    if (!handler) return;
    Promise.resolve()
      .then(() => handler(req))
      .then(
        (reply) => process.send!({ ...(reply as object), id: req.id }),
        (err: unknown) => process.send!({ id: req.id, error: err instanceof Error ? err.message : String(err) }),
      );
  });
}
