import { parseArgs } from 'node:util';
import { defaultOptions, runSoak } from './soak.js';
import { formatReport } from './soak-report.js';

/**
 * `npm run soak -- --minutes N [--rate JOBS_PER_S] [--warmup S]`: a soak of N (fractional)
 * minutes, its figures on stdout; exit 1 when a series grows or the load failed.
 */
const { values } = parseArgs({
  options: {
    minutes: { type: 'string', default: '10' },
    rate: { type: 'string' },
    warmup: { type: 'string' },
  },
});
const minutes = Number(values.minutes);
if (!(minutes > 0)) throw new Error(`--minutes must be a positive number, got ${values.minutes}`);
const opts = defaultOptions(minutes);
if (values.rate) opts.load.jobsPerSecond = Number(values.rate);
if (values.warmup) opts.warmupSeconds = Number(values.warmup);
const result = await runSoak({ ...opts, log: (l) => console.log(l) });
console.log(formatReport(result));
process.exit(result.failures.length ? 1 : 0);
