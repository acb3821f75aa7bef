import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import path from 'node:path';

const ROOT = path.resolve(import.meta.dirname, '..');

/**
 * A process with `switchyard serve`'s unhandledRejection listener, and one promise nobody
 * awaited that rejects: `reason` is the JavaScript expression of what it rejects with.
 */
function rejectUnawaited(reason: string) {
  const script = `
    import { tolerateOutageRejections } from './api/main/commands/outage-rejections.ts';
    process.on('unhandledRejection', tolerateOutageRejections({ warn: (o, msg) => console.log(msg, o.err.name) }));
    Promise.reject(${reason});
    setTimeout(() => console.log('still running'), 50);
  `;
  return spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { cwd: ROOT, encoding: 'utf8', timeout: 30_000 });
}

describe('switchyard serve: unhandled rejections', function () {
  this.timeout(60_000);

  it("logs a Redis command's outage failure nobody awaited and keeps the process running", () => {
    const out = rejectUnawaited(`Object.assign(new Error('Reached the max retries per request limit (which is 1).'), { name: 'MaxRetriesPerRequestError' })`);
    assert.equal(out.status, 0, out.stderr);
    assert.match(out.stdout, /a datastore command nobody awaited failed during an outage; carrying on MaxRetriesPerRequestError/);
    assert.match(out.stdout, /still running/);
  });

  it('still ends the process on any other unhandled rejection (a bug)', () => {
    const out = rejectUnawaited(`new TypeError('x is not a function')`);
    assert.notEqual(out.status, 0);
    assert.doesNotMatch(out.stdout, /still running/);
    assert.match(out.stderr, /TypeError: x is not a function/);
  });
});
