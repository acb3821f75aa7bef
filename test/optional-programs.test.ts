import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtemp, rm, symlink } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { CHROMIUM, GO, PROMETHEUS, PROMTOOL, findProgram } from './helpers/optional-program.js';

const run = promisify(execFile);
const ROOT = path.resolve(import.meta.dirname, '..');
const MOCHA = path.join(ROOT, 'node_modules/mocha/bin/mocha.js');
// The suites that need Chromium, Prometheus, promtool, espeak-ng, pocketsphinx, ffmpeg or Go.
const SUITES = ['test/bull-board.test.ts', 'test/dashboards.test.ts', 'test/local-engines.test.ts', 'test/go-client.test.ts'];

/**
 * `npm test` on a machine with only Node and Redis: the suites that drive optional programs run
 * in a child mocha whose PATH holds node alone, as on a fresh machine.
 */
describe('optional system programs', function () {
  this.timeout(120_000);
  let bare: string;
  let env: NodeJS.ProcessEnv;

  before(async () => {
    bare = await mkdtemp(path.join(os.tmpdir(), 'switchyard-bare-path-'));
    await symlink(process.execPath, path.join(bare, 'node'));
    env = { ...process.env, PATH: bare };
    for (const p of [CHROMIUM, PROMETHEUS, PROMTOOL, GO]) delete env[p.env!];
    delete env.CI;
  });
  after(async () => {
    await rm(bare, { recursive: true, force: true });
  });

  it('finds a program on PATH and nowhere else', () => {
    assert.equal(findProgram(CHROMIUM, { PATH: bare }), undefined);
    assert.equal(findProgram({ name: 'node', install: '' }, { PATH: `/nonexistent${path.delimiter}${bare}` }), path.join(bare, 'node'));
  });

  it('reports their tests pending with the install command when the programs are missing', async () => {
    const { stdout } = await run(process.execPath, [MOCHA, ...SUITES], { cwd: ROOT, env, maxBuffer: 16 << 20 });
    assert.match(stdout, /\d+ passing/);
    assert.doesNotMatch(stdout, /failing/);
    assert.match(stdout, /pending: chromium is not installed; apt-get install -y chromium/);
    assert.match(stdout, /pending: promtool is not installed; apt-get install -y --no-install-recommends prometheus/);
    assert.match(stdout, /pending: prometheus is not installed; apt-get install -y --no-install-recommends prometheus/);
    assert.match(stdout, /pending: .*ffmpeg is not installed; apt-get install -y ffmpeg/);
    assert.match(stdout, /pending: go is not installed; apt-get install -y golang-go/);
  });

  it('fails them under CI=true when the programs are missing', async () => {
    const failed = await run(process.execPath, [MOCHA, ...SUITES], { cwd: ROOT, env: { ...env, CI: 'true' }, maxBuffer: 16 << 20 }).then(
      () => undefined,
      (err: { code: number; stdout: string }) => err,
    );
    assert.ok(failed, 'mocha passed although CI=true and the programs are missing');
    assert.ok(failed.code > 0);
    assert.match(failed.stdout, /CI=true requires chromium is not installed; apt-get install -y chromium/);
    assert.match(failed.stdout, /CI=true requires go is not installed; apt-get install -y golang-go/);
  });
});
