import { readFileSync } from 'node:fs';
import { startIpcChild, type IpcChild } from './ipc-child.js';

export interface OpenResult {
  /** HTTP status -> streams (0: socket error); 200 counts streams that got their first frame. */
  statuses: Record<string, number>;
  seconds: number;
}

export interface Collected {
  /** Publish -> receive, ms, one per frame received since `start`. */
  latencies: Float64Array;
  frames: number;
  /** Frames whose id was not the previous one + 1 on their stream (a gap or a repeat). */
  outOfOrder: number;
  /** Streams the server ended while the benchmark still read them. */
  closedByServer: number;
}

/** utime+stime of a process, all threads, in µs (CLK_TCK is 100 on Linux). */
export function processCpuUs(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(f[11]) + Number(f[12])) * 1e4;
}

/**
 * `processes` children running bench/servers/sse-clients.ts; stream i is opened by child
 * i % processes. Every call goes to all of them and the answers are summed.
 */
export class SseClientFleet {
  private constructor(private readonly children: IpcChild[]) {}

  static async start(processes: number): Promise<SseClientFleet> {
    return new SseClientFleet(await Promise.all(Array.from({ length: processes }, () => startIpcChild('servers/sse-clients.ts'))));
  }

  get pids(): number[] {
    return this.children.map((c) => c.pid);
  }

  cpuUs(): number {
    return this.pids.reduce((sum, pid) => sum + processCpuUs(pid), 0);
  }

  /** Opens `connections` streams, stream i to urls[i % urls.length]. */
  async open(urls: string[], connections: number, headers: Record<string, string>, concurrency: number): Promise<OpenResult> {
    const k = this.children.length;
    const answers = await Promise.all(
      this.children.map((child, j) => {
        const indexes = Array.from({ length: Math.ceil((connections - j) / k) }, (_, x) => j + x * k);
        return child.request<OpenResult>('open', { urls, indexes, headers, concurrency: Math.max(1, Math.round(concurrency / k)) }, 600_000);
      }),
    );
    const statuses: Record<string, number> = {};
    for (const a of answers) for (const [s, n] of Object.entries(a.statuses)) statuses[s] = (statuses[s] ?? 0) + n;
    return { statuses, seconds: Math.max(...answers.map((a) => a.seconds)) };
  }

  async start(): Promise<void> {
    await Promise.all(this.children.map((c) => c.request('start')));
  }

  async frames(): Promise<number> {
    const answers = await Promise.all(this.children.map((c) => c.request<{ frames: number }>('counts')));
    return answers.reduce((sum, a) => sum + a.frames, 0);
  }

  async collect(): Promise<Collected> {
    const answers = await Promise.all(this.children.map((c) => c.request<Collected>('collect')));
    const latencies = new Float64Array(answers.reduce((sum, a) => sum + a.latencies.length, 0));
    let at = 0;
    for (const a of answers) {
      latencies.set(a.latencies, at);
      at += a.latencies.length;
    }
    const sum = (k: 'frames' | 'outOfOrder' | 'closedByServer') => answers.reduce((s, a) => s + a[k], 0);
    return { latencies, frames: sum('frames'), outOfOrder: sum('outOfOrder'), closedByServer: sum('closedByServer') };
  }

  async stop(): Promise<void> {
    await Promise.all(this.children.map((c) => c.request('close').catch(() => {})));
    await Promise.all(this.children.map((c) => c.stop()));
  }
}
