import { randomInt } from 'node:crypto';
import { parseArgs } from 'node:util';
import { runFuzz, summaryTable } from './fuzz-run.js';

/**
 * `npm run fuzz -- --requests N --seed S [--only operationId,...] [--rss-bound-mb M]`: the
 * schema-driven fuzzer of docs/reliability.md ("Fuzzing") against a fresh gateway process.
 * Prints the seed first, so a failing run can be replayed; exits 1 on any violation.
 */
const { values } = parseArgs({
  options: {
    requests: { type: 'string', default: '10000' },
    seed: { type: 'string' },
    only: { type: 'string' },
    'rss-bound-mb': { type: 'string', default: '150' },
    'timeout-ms': { type: 'string', default: '30000' },
  },
});
const seed = values.seed === undefined ? randomInt(2 ** 31 - 1) : Number(values.seed);
if (!Number.isInteger(seed)) throw new Error(`--seed takes an integer, not ${values.seed}`);
console.log(`fuzz: seed ${seed} (replay with --seed ${seed}), ${values.requests} requests`);

const report = await runFuzz({
  requests: Number(values.requests),
  seed,
  only: values.only?.split(','),
  rssBoundMb: Number(values['rss-bound-mb']),
  timeoutMs: Number(values['timeout-ms']),
  log: (line) => console.error(`fuzz: ${line}`),
});
console.log(summaryTable(report));
console.log(
  `\n${report.requests} requests over ${report.stats.length} operations in ${report.seconds.toFixed(1)} s (${(report.requests / report.seconds).toFixed(0)} requests/s); ` +
    `gateway RSS ${report.rss.startMb.toFixed(1)} MB after warm-up, ${report.rss.endMb.toFixed(1)} MB at the end (bound +${report.rss.boundMb} MB), peak ${report.rss.peakMb.toFixed(1)} MB; ` +
    `V8 heap used ${report.heap.startMb.toFixed(1)} MB after warm-up, ${report.heap.endMb.toFixed(1)} MB at the end`,
);
console.log('\nsuccess paths out of reach (fuzzed for their refusals):');
for (const [op, why] of Object.entries(report.limited)) console.log(`  ${op}: ${why}`);
if (report.violations.length) {
  console.log(`\n${report.violations.length} violation(s), seed ${seed}:`);
  for (const v of report.violations) console.log(`\n- ${v}`);
  process.exitCode = 1;
} else {
  console.log(`\nno violation (seed ${seed})`);
}
