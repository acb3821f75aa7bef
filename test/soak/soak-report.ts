import type { SoakResult } from './soak.js';
import type { SeriesSpec } from './soak-sampler.js';

/** A value in its series' unit, for a table: MiB, milliseconds or a count. */
export function formatValue(unit: SeriesSpec['unit'], v: number): string {
  if (unit === 'bytes') return `${(v / 1024 / 1024).toFixed(2)} MiB`;
  if (unit === 'seconds') return `${(v * 1000).toFixed(2)} ms`;
  return v.toFixed(v % 1 ? 1 : 0);
}

/** The soak's figures, one row per series (start/end/min/max of the sampled run; slope and verdict over its second half), then the load. */
export function formatReport(r: SoakResult): string {
  const header = ['series', 'start', 'end', 'min', 'max', 'slope/min (2nd half)', 'projected', 'limit', 'verdict'];
  const rows = r.verdicts.map(({ spec, verdict: v }) => [
    spec.name,
    formatValue(spec.unit, v.start),
    formatValue(spec.unit, v.end),
    formatValue(spec.unit, v.min),
    formatValue(spec.unit, v.max),
    formatValue(spec.unit, v.slopePerS * 60),
    formatValue(spec.unit, v.projected),
    spec.reportOnly ? '-' : formatValue(spec.unit, v.limit),
    spec.reportOnly ? 'reported' : v.grows ? 'GROWS' : 'flat',
  ]);
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((row) => row[i]!.length)));
  const line = (cells: string[]) => `| ${cells.map((c, i) => c.padEnd(widths[i]!)).join(' | ')} |`;
  const c = r.counts;
  return [
    `soak: ${r.minutes} min sampled, ${r.samples} samples`,
    line(header),
    line(widths.map((w) => '-'.repeat(w))),
    ...rows.map(line),
    '',
    `load: ${c.submitted} jobs submitted, ${c.succeeded} succeeded (${Object.keys(c.byKind).length} kinds); followed by SSE ${c.followedBySse}, webhook ${c.followedByWebhook}, polling ${c.followedByPolling}; ${c.inputsFromOutputs} file inputs from earlier outputs; ${c.chatStreams} streamed chat completions; ${c.errors} errors`,
    ...r.errorSamples.map((e) => `  error: ${e}`),
    r.failures.length ? `FAIL\n${r.failures.map((f) => `  - ${f}`).join('\n')}` : 'PASS',
  ].join('\n');
}
