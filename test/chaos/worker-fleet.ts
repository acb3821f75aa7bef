import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { FaultProxy } from './fault-proxy.js';

/** One `switchyard worker --engine demo` process and the link (a proxy) it reaches the gateways through. */
interface FleetMember {
  index: number;
  proxy: FaultProxy;
  child: ChildProcess | null;
}

/**
 * The fleet of CLI workers: real processes running the demo engine, each connected through
 * its own FaultProxy so a scenario can kill any of them for real or partition some of them
 * from the gateways. A worker's link tries the gateways in an order of its own, so the fleet
 * spreads over both and a worker whose gateway died reconnects to the other.
 */
export class WorkerFleet {
  readonly members: FleetMember[] = [];
  /** Worker processes started so far (restarts included). */
  spawned = 0;

  constructor(
    private readonly gatewayPorts: () => number[],
    private readonly token: string,
    private readonly demoDelayMs: number,
  ) {}

  async start(count: number): Promise<void> {
    for (let index = 0; index < count; index++) {
      const proxy = await new FaultProxy(() => {
        const ports = this.gatewayPorts();
        return index % 2 === 0 ? ports : [...ports].reverse();
      }).listen();
      const member: FleetMember = { index, proxy, child: null };
      this.members.push(member);
      this.spawn(member);
    }
  }

  private spawn(member: FleetMember): void {
    const args = ['api/bin/switchyard.mjs', 'worker', '--gateway', member.proxy.url, '--token', this.token, '--kinds', 'inference:image:generate', '--engine', 'demo', '--demo-delay-ms', String(this.demoDelayMs)];
    member.child = spawn(process.execPath, args, { stdio: ['ignore', 'ignore', 'ignore'] });
    this.spawned++;
  }

  /** SIGKILLs the given workers (a crash: no goodbye, leases left to lapse) and waits until they are gone. */
  async kill(indexes: number[]): Promise<void> {
    await Promise.all(
      indexes.map(async (i) => {
        const child = this.members[i].child;
        if (!child || child.exitCode !== null || child.signalCode !== null) return;
        const exited = once(child, 'exit');
        child.kill('SIGKILL');
        await exited;
      }),
    );
  }

  /** Starts a new process for every member whose worker is not running. */
  respawnDead(): void {
    for (const m of this.members) if (!m.child || m.child.exitCode !== null || m.child.signalCode !== null) this.spawn(m);
  }

  async stop(): Promise<void> {
    await this.kill(this.members.map((m) => m.index));
    await Promise.all(this.members.map((m) => m.proxy.close()));
  }
}
