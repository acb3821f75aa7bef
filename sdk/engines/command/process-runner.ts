import { spawn } from 'node:child_process';
import { LineSplitter } from './line-splitter.js';

export interface ProcessSpec {
  /** Program and arguments; run without a shell. */
  argv: string[];
  env: NodeJS.ProcessEnv;
  /** Written to stdin, which is then closed; a program that does not read it is fine. */
  stdin?: string;
  signal: AbortSignal;
  /** Ended (SIGTERM, then SIGKILL) after this long; 0: no limit. */
  timeoutMs: number;
  /** Between SIGTERM and SIGKILL. */
  killGraceMs: number;
  /** Longer stdout/stderr lines are cut to this many characters. */
  maxLineChars: number;
  onStdout(line: string, truncated: boolean): void;
  onStderr(line: string, truncated: boolean): void;
}

export interface ProcessEnd {
  pid: number | undefined;
  /** Exit status, or null when a signal ended it. */
  code: number | null;
  signal: NodeJS.Signals | null;
  /** Why the worker ended it, if it did. */
  endedBy: 'timeout' | 'abort' | null;
  /** No such program, or not executable: the spawn error. */
  spawnError?: NodeJS.ErrnoException;
  stdoutBytes: number;
  /** The most characters of an unfinished line held at once (bounded by maxLineChars). */
  maxHeld: number;
}

/** Signals the child's whole process group: a shell script's own children go with it. */
function killGroup(pid: number | undefined, signal: NodeJS.Signals): void {
  if (pid === undefined) return;
  try {
    process.kill(-pid, signal);
  } catch {
    // Already gone.
  }
}

/**
 * Runs one program to its end. It leads a process group of its own (detached), so cancel and
 * timeout reach everything it started: SIGTERM to the group, SIGKILL after the grace period.
 * When the program itself exits, whatever it left running in its group is killed too: one
 * lease, one process tree, nothing outlives it. Resolves once the program has exited and its
 * output is read, never before: when this settles after a cancel, the process is gone.
 */
export function runProcess(spec: ProcessSpec): Promise<ProcessEnd> {
  return new Promise((resolve) => {
    const [program, ...args] = spec.argv;
    const child = spawn(program, args, { env: spec.env, stdio: ['pipe', 'pipe', 'pipe'], detached: true });
    const out = new LineSplitter(spec.maxLineChars, spec.onStdout);
    const err = new LineSplitter(spec.maxLineChars, spec.onStderr);
    let stdoutBytes = 0;
    let endedBy: ProcessEnd['endedBy'] = null;
    let killTimer: NodeJS.Timeout | undefined;
    let spawnError: NodeJS.ErrnoException | undefined;

    const end = (why: 'timeout' | 'abort') => {
      if (endedBy || child.exitCode !== null || child.signalCode !== null) return;
      endedBy = why;
      killGroup(child.pid, 'SIGTERM');
      killTimer = setTimeout(() => killGroup(child.pid, 'SIGKILL'), spec.killGraceMs);
    };
    const onAbort = () => end('abort');
    const timer = spec.timeoutMs > 0 ? setTimeout(() => end('timeout'), spec.timeoutMs) : undefined;
    if (spec.signal.aborted) queueMicrotask(onAbort);
    else spec.signal.addEventListener('abort', onAbort, { once: true });

    child.stdout.on('data', (chunk: Buffer) => {
      stdoutBytes += chunk.length;
      out.write(chunk);
    });
    child.stderr.on('data', (chunk: Buffer) => err.write(chunk));
    // EPIPE when the program exits without reading its input: not an error of the job.
    child.stdin.on('error', () => {});
    child.stdin.end(spec.stdin ?? '');
    child.on('error', (e: NodeJS.ErrnoException) => {
      spawnError = e;
    });
    // 'exit' comes first: the group is cleared then, so a background child that still holds
    // stdout open cannot keep 'close' from coming.
    child.on('exit', () => killGroup(child.pid, 'SIGKILL'));
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      clearTimeout(killTimer);
      spec.signal.removeEventListener('abort', onAbort);
      out.end();
      err.end();
      resolve({ pid: child.pid, code, signal, endedBy, spawnError, stdoutBytes, maxHeld: Math.max(out.maxHeld, err.maxHeld) });
    });
  });
}
