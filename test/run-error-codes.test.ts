import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { RUN_ERROR_ALIASES, RUN_ERROR_CODES, RUN_ERROR_CODE_NAMES, normalizeRunError } from '../models/run-error-codes.js';
import { RUN_ERROR_CODES as CLIENT_CODES } from '../sdk/client/run-error-codes.js';
import { TestGateway, cleanupPrefix, uniquePrefix, until } from './helpers/harness.js';
import { RawWorker } from './helpers/raw-worker.js';

const IMAGE = 'inference:image:generate';
const serverList = Object.fromEntries(RUN_ERROR_CODE_NAMES.map((c) => [c, RUN_ERROR_CODES[c].retryable]));

/**
 * The run error codes (docs/jobs.md, "Error codes"): one list on the server
 * (models/run-error-codes.ts), the same in every client, and every code reached by a test: a
 * worker's codes here end to end, the gateway's own in the tests named below, which assert them.
 */
describe('run error codes: one list, the same in every client, each reached', function () {
  this.timeout(60_000);

  it('the TypeScript, Python and Go clients carry the server list, with the same retryable defaults', () => {
    assert.deepEqual(Object.fromEntries(Object.entries(CLIENT_CODES).map(([c, v]) => [c, v.retryable])), serverList, 'sdk/client');
    // Read, not run: the check holds where no python3 or go is installed.
    const python = readFileSync('sdk/python/switchyard/error_codes.py', 'utf8');
    const names = Object.fromEntries([...python.matchAll(/^([A-Z_]+) = "([a-z_]+)"$/gm)].map((m) => [m[1], m[2]]));
    const dict = Object.fromEntries([...python.matchAll(/^ {4}([A-Z_]+): (True|False),$/gm)].map((m) => [names[m[1]], m[2] === 'True']));
    assert.deepEqual(dict, serverList, 'sdk/python');
    assert.match(readFileSync('sdk/python/switchyard/__init__.py', 'utf8'), /from \.error_codes import RUN_ERROR_CODES/, 'exported by the package');
    const go = readFileSync('sdk/go/error_codes.go', 'utf8');
    const consts = Object.fromEntries([...go.matchAll(/^\t(RunError\w+)\s+= "([a-z_]+)"$/gm)].map((m) => [m[1], m[2]]));
    const map = Object.fromEntries([...go.matchAll(/^\t(RunError\w+):\s+(true|false),$/gm)].map((m) => [consts[m[1]], m[2] === 'true']));
    assert.deepEqual(map, serverList, 'sdk/go');
    assert.equal(Object.keys(consts).length, RUN_ERROR_CODE_NAMES.length);
  });

  it('docs/jobs.md lists every code with its retryable default, and every alias', () => {
    const docs = readFileSync('docs/jobs.md', 'utf8');
    const section = docs.slice(docs.indexOf('## Error codes'));
    for (const code of RUN_ERROR_CODE_NAMES) assert.match(section, new RegExp(`^\\| \`${code}\` \\| ${RUN_ERROR_CODES[code].retryable ? 'yes' : 'no'} \\|`, 'm'), code);
    for (const alias of Object.keys(RUN_ERROR_ALIASES)) assert.ok(section.includes(`\`${alias}\``), alias);
  });

  it('normalizes a worker\'s code: the list\'s kept, an alias mapped, an unknown one engine_error with the worker\'s own kept', () => {
    const e = { message: 'm', retryable: false };
    assert.deepEqual(normalizeRunError({ code: 'upstream_error', ...e }), { code: 'upstream_error', ...e });
    assert.deepEqual(normalizeRunError({ code: 'bad_input', ...e }), { code: 'invalid_input', reported_code: 'bad_input', ...e });
    assert.deepEqual(normalizeRunError({ code: 'oom', ...e, retryable: true }), { code: 'engine_error', reported_code: 'oom', ...e, retryable: true });
    for (const target of Object.values(RUN_ERROR_ALIASES)) assert.ok(RUN_ERROR_CODE_NAMES.includes(target));
  });

  /** The gateway's own codes, each asserted (on a job, or on a refused submission) by the test named (file and title). */
  const GATEWAY_TESTS: Record<string, [string, string]> = {
    worker_lost: ['test/job-attempts.test.ts', 'max_attempts 1: the worker killed on its attempt fails the run worker_lost'],
    timed_out: ['test/job-attempts.test.ts', 'timeouts: without retry_on_timeout the first timed-out attempt fails the run'],
    canceled: ['test/job-attempts.test.ts', 'the default is JOB_MAX_ATTEMPTS'],
    expired: ['test/job-deadlines.test.ts', 'one not started by then fails expired'],
    receipt_invalid: ['test/private-refusals.test.ts', 'fails the run with receipt_invalid after its last attempt'],
    // A refused submission's code (402), never a run's.
    budget_exceeded: ['test/job-cost.test.ts', 'refuses a submission past the monthly budget with 402 budget_exceeded'],
  };

  it('each code the gateway itself sets (on a run, or refusing a submission) is asserted by the test named for it', () => {
    for (const code of RUN_ERROR_CODE_NAMES.filter((c) => RUN_ERROR_CODES[c].origin !== 'worker')) {
      const [file, title] = GATEWAY_TESTS[code] ?? assert.fail(`no test named for ${code}`);
      const source = readFileSync(file, 'utf8');
      const at = source.indexOf(title);
      assert.ok(at >= 0, `${file} has the test "${title}"`);
      const body = source.slice(at, source.indexOf('\n  it(', at + 1) >>> 0 || undefined);
      assert.ok(body.includes(`'${code}'`), `${file}: "${title}" asserts ${code}`);
    }
  });

  describe('a worker\'s codes, end to end: each fails the job with that code, its attempt and its history entry', () => {
    const prefix = uniquePrefix('run-error-codes');
    let gw: TestGateway;
    let key: string;
    let w: RawWorker;
    before(async () => {
      gw = await new TestGateway(prefix).start();
      ({ key } = await gw.account(1000));
      w = await new RawWorker(gw.url, await gw.workerToken('open')).connect({ kinds: [IMAGE] });
    });
    after(async () => {
      w?.terminate();
      await gw?.stop();
      await cleanupPrefix(prefix);
    });

    const failWith = async (code: string, retryable: boolean) => {
      const res = await gw.submit(key, { kind: IMAGE, input: { prompt: code }, max_attempts: 1 });
      assert.equal(res.status, 202, res.text);
      const lease = await w.lease();
      assert.equal(lease.run_id, res.body.run_id);
      assert.equal((await w.report(lease, { type: 'fail', error: { code, message: `failed: ${code}`, retryable } })).type, 'ack');
      return until(`${code} ends`, async () => {
        const j = (await gw.request('GET', `/v1/jobs/${res.body.run_id}`, { key })).body;
        return j.terminal ? j : null;
      });
    };

    for (const code of RUN_ERROR_CODE_NAMES.filter((c) => RUN_ERROR_CODES[c].origin === 'worker')) {
      it(code, async () => {
        const job = await failWith(code, RUN_ERROR_CODES[code].retryable);
        assert.equal(job.status, 'failed');
        // The last attempt (max_attempts 1): final, whatever the worker said.
        assert.deepEqual(job.error, { code, message: `failed: ${code}`, retryable: false, attempt: 1 });
        assert.deepEqual(job.attempt_history.map((a: { error: { code: string; retryable: boolean } }) => [a.error.code, a.error.retryable]), [[code, false]]);
      });
    }

    it('an old name is recorded as the list\'s, with the worker\'s own beside it', async () => {
      for (const [alias, code] of Object.entries(RUN_ERROR_ALIASES)) {
        const job = await failWith(alias, false);
        assert.deepEqual([job.error.code, job.error.reported_code], [code, alias]);
      }
    });
  });
});
