import { startIpcChild, type IpcChild } from './ipc-child.js';

export interface SimStatus {
  registered: number;
  byGateway: Record<string, number>;
  lastRegisteredAt: number;
  refusals: number;
  connectErrors: number;
}

/**
 * The simulated fleet: `processes` children running bench/servers/raw-fleet.ts, the workers
 * dealt out among them, each worker on one of the gateways (worker i on gateway i mod n, so
 * every gateway holds an equal share whichever process a worker lives in).
 */
export class FleetSims {
  private constructor(private readonly children: IpcChild[]) {}

  static async start(processes: number): Promise<FleetSims> {
    // Old-space room for 5,000+ sockets per process with their buffers, without GC pressure.
    return new FleetSims(await Promise.all(Array.from({ length: processes }, () => startIpcChild('servers/raw-fleet.ts', { nodeArgs: ['--max-old-space-size=4096'] }))));
  }

  get pids(): number[] {
    return this.children.map((c) => c.pid);
  }

  /** Adds `count` workers numbered from `from`; resolves with the wall time until all registered. */
  async connect(o: { gateways: string[]; token: string; kind: string; from: number; count: number; inFlight: number }): Promise<{ ms: number; refusals: number; connectErrors: number }> {
    const n = this.children.length;
    const started = performance.now();
    const parts = await Promise.all(
      this.children.map((c, k) => {
        // Contiguous numbers per process keep i mod gateways balanced within each process.
        const share = Math.floor(o.count / n) + (k < o.count % n ? 1 : 0);
        const from = o.from + k * Math.floor(o.count / n) + Math.min(k, o.count % n);
        return c.request<{ refusals: number; connectErrors: number }>('connect', { gateways: o.gateways, token: o.token, kind: o.kind, from, count: share, inFlight: Math.max(1, Math.round(o.inFlight / n)) }, 600_000);
      }),
    );
    return { ms: performance.now() - started, refusals: parts.reduce((s, p) => s + p.refusals, 0), connectErrors: parts.reduce((s, p) => s + p.connectErrors, 0) };
  }

  async status(): Promise<SimStatus> {
    const all = await Promise.all(this.children.map((c) => c.request<SimStatus>('status')));
    const byGateway: Record<string, number> = {};
    for (const s of all) for (const [g, k] of Object.entries(s.byGateway)) byGateway[g] = (byGateway[g] ?? 0) + k;
    return {
      registered: all.reduce((s, x) => s + x.registered, 0),
      byGateway,
      lastRegisteredAt: Math.max(...all.map((x) => x.lastRegisteredAt)),
      refusals: all.reduce((s, x) => s + x.refusals, 0),
      connectErrors: all.reduce((s, x) => s + x.connectErrors, 0),
    };
  }

  /** Lease arrival times (run id -> ms on the shared wall clock) since the last call. */
  async leases(): Promise<Map<string, number>> {
    const all = await Promise.all(this.children.map((c) => c.request<{ leases: Array<[string, number]> }>('leases')));
    return new Map(all.flatMap((a) => a.leases));
  }

  /** The worst event-loop delay of the worker processes since the last call (p99 and max, ms). */
  async loop(): Promise<{ p99Ms: number; maxMs: number }> {
    const all = await Promise.all(this.children.map((c) => c.request<{ p99Ms: number; maxMs: number }>('loop')));
    return { p99Ms: Math.max(...all.map((a) => a.p99Ms)), maxMs: Math.max(...all.map((a) => a.maxMs)) };
  }

  async stop(): Promise<void> {
    await Promise.all(this.children.map((c) => c.request('close').catch(() => {})));
    await Promise.all(this.children.map((c) => c.stop()));
  }
}
