import type { Measurement } from './measurement.js';

export const fmt = (n: number, digits = 0) => n.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });

/** The q-quantile (0..1, nearest rank) of ascending values; NaN when there are none. */
export function percentile(sorted: ArrayLike<number>, q: number): number {
  return sorted.length ? sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))] : NaN;
}

/** A fixed-width table: one row per phase. */
export function formatTable(rows: Measurement[]): string {
  // `s` is the measured time: autocannon stops on its 1 s sampling tick, so a 10 s phase may run 11 s.
  const header = ['phase', 'jobs/s', 'req/s', 'p50 ms', 'p99 ms', 'jobs', 's', 'non-2xx', 'errors'];
  const cells = rows.map((m) => [
    m.name,
    fmt(m.jobsPerSec),
    m.requestsPerSec === undefined ? '-' : fmt(m.requestsPerSec),
    fmt(m.p50Ms, 2),
    fmt(m.p99Ms, 2),
    fmt(m.jobs),
    fmt(m.seconds, 1),
    m.requestsPerSec === undefined ? '-' : fmt(m.non2xx),
    fmt(m.errors),
  ]);
  return table(header, cells);
}

/** Fixed-width columns, the first left-aligned. */
export function table(header: string[], cells: string[][]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...cells.map((c) => c[i].length)));
  const line = (c: string[]) => c.map((v, i) => (i === 0 ? v.padEnd(widths[i]) : v.padStart(widths[i]))).join('  ');
  return [line(header), line(widths.map((w) => '-'.repeat(w))), ...cells.map(line)].join('\n');
}

/** Status counts other than the accepted one, e.g. "401 x 12, 500 x 3". */
export function otherStatuses(m: Measurement, accepted: number): string {
  return Object.entries(m.statusCodes ?? {})
    .filter(([code]) => code !== String(accepted))
    .map(([code, n]) => `${code} x ${n}`)
    .join(', ');
}
