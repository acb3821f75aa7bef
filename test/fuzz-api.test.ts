import assert from 'node:assert/strict';
import { runFuzz, summaryTable } from './fuzz/fuzz-run.js';

/**
 * Issue 30, item 4: the CI pass of the schema-driven fuzzer (test/fuzz/, docs/reliability.md
 * "Fuzzing"). 2,000 requests drawn from the served OpenAPI document with a fixed seed, against a
 * fresh gateway process: no 5xx, every error in its documented shape, account B unchanged, the
 * gateway's RSS within its bound. `npm run fuzz` is the long run with a random seed.
 */
describe('schema-driven fuzzing of every operation (2,000 requests, fixed seed)', function () {
  this.timeout(300_000);
  const SEED = 30_2026;

  it('finds no violation', async () => {
    const report = await runFuzz({ requests: 2000, seed: SEED, rssBoundMb: 150, timeoutMs: 30_000 });
    // Every operation of the document was sent requests (none skipped silently).
    assert.ok(report.stats.length > 50, `only ${report.stats.length} operations`);
    assert.deepEqual(report.stats.filter((s) => s.requests === 0).map((s) => s.operationId), []);
    assert.ok(report.requests >= 2000, `${report.requests} requests`);
    assert.deepEqual(report.violations, [], `seed ${SEED}\n${summaryTable(report)}`);
  });
});
