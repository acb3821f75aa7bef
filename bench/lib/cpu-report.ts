import type { Budget, CpuPerJob } from './cpu-per-job.js';
import { fmt, table } from './report.js';

export interface PhaseCpu {
  name: string;
  cpu?: CpuPerJob;
}

const us = (n: number | undefined) => (n === undefined ? '-' : fmt(n, 1));

/** The CPU table, each phase's costliest Redis commands, and the gateway's ceilings against the goal. */
export function formatCpuReport(rows: PhaseCpu[], gateway: CpuPerJob | undefined, goalPct: string, needs: Budget, cores: number): string {
  const header = ['phase', 'process µs/job', 'its main thread', 'Redis µs/job', 'load gen µs/req', 'sum µs/job', 'other µs/job', 'busy cores'];
  const cells = rows.map(({ name, cpu: c }) =>
    c
      ? [name, us(c.processUsPerJob), us(c.processMainThreadUsPerJob), us(c.redisUsPerJob), us(c.loadGenUsPerRequest), us(c.sumUsPerJob), us(c.otherUsPerJob), fmt(c.busyCores, 2)]
      : [name, ...header.slice(1).map(() => '-')],
  );
  const out = [
    'CPU over the measured windows, per job (Redis is shared: its figures include anything else it served)',
    table(header, cells),
    'process: the server child (raw BullMQ: this process); load gen: this process (autocannon);',
    'sum: process + Redis + load gen; other: busy CPU none of these account for (kernel, other programs)',
  ];
  for (const { name, cpu: c } of rows) {
    const top = c?.redisCommands.slice(0, 6).map((x) => `${x.name} ${us(x.usPerJob)} µs (${fmt(x.callsPerJob, 2)} calls)`);
    if (top?.length) out.push(`Redis commands per job, ${name}: ${top.join(', ')}`);
  }
  out.push('(command time excludes socket I/O; commands a Lua script runs also count inside its evalsha)');
  if (gateway) {
    const g = gateway;
    out.push(
      '',
      'gateway ceilings from its CPU per job:',
      `  its event loop, ${us(g.processMainThreadUsPerJob)} µs/job on one thread: <= ${fmt(g.eventLoopCapJobsPerSec)} jobs/s`,
      `  Redis, ${us(g.redisMainThreadUsPerJob)} µs/job on its one command thread: <= ${fmt(g.redisThreadCapJobsPerSec)} jobs/s`,
      `  ${cores} cores shared, sum ${us(g.sumUsPerJob)} µs/job: <= ${fmt(g.coresCapJobsPerSec)} jobs/s`,
      `${goalPct} of bare Koa is ${fmt(needs.jobsPerSec)} jobs/s: needs <= ${us(needs.redisMainThreadUsPerJob)} µs/job of Redis thread and <= ${us(needs.sumUsPerJob)} µs/job in all`,
    );
  }
  return out.join('\n');
}
