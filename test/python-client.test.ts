import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { ClientTestGateway } from './helpers/client-gateway.js';
import { uniquePrefix } from './helpers/harness.js';
import { PYTHON, PYTHON_VENV, requireProgram } from './helpers/optional-program.js';

const ROOT = path.resolve(import.meta.dirname, '..');
const PACKAGE = path.join(ROOT, 'sdk', 'python');

/**
 * The Python client (sdk/python/switchyard) is tested by its own pytest suite
 * (sdk/python/tests), against a real gateway with demo workers for every kind and a proxy
 * that cuts event streams mid-frame; this suite starts them and reads pytest's verdict. It
 * also installs the package with pip into a fresh venv, offline, and runs the README's quick
 * start with it as written.
 */
describe('Python client (sdk/python): pytest against a real gateway and demo workers', function () {
  this.timeout(300_000);
  const prefix = uniquePrefix('pyclient');
  let python: string;
  let setup: ClientTestGateway | undefined;

  before(async function () {
    python = requireProgram(this, PYTHON);
    setup = await new ClientTestGateway(prefix, 'python-client').start();
  });
  after(async () => {
    await setup?.stop();
  });

  it('pytest passes, with every gateway test run (none skipped) and the stream cut by the proxy', async () => {
    // Run from the package's folder, so its pyproject.toml is pytest's rootdir and ini (the
    // worker SDK's suite has its own, under worker/).
    const res = await run(python, ['-m', 'pytest', 'tests', '-q', '-rs', '-p', 'no:cacheprovider'], { ...setup!.env }, PACKAGE);
    assert.equal(res.code, 0, `pytest failed (exit ${res.code}):\n${res.output}`);
    assert.match(res.output, /\d+ passed/, res.output);
    if (process.env.PYTEST_ADDOPTS) console.log(res.output); // a developer choosing tests sees what ran
    assert.doesNotMatch(res.output, /skipped|xfail|deselected/, `no test of the suite may be skipped here:\n${res.output}`);
    assert.ok(setup!.proxy!.cuts >= 2, `the proxy cut ${setup!.proxy!.cuts} streams`);
  });

  describe('installed with pip', function () {
    let venvPython: string;

    before(function () {
      venvPython = requireProgram(this, PYTHON_VENV);
    });

    it("pip installs the package offline, and the README's quick start runs with it as written", async () => {
      const dir = mkdtempSync(path.join(os.tmpdir(), 'switchyard-py-quickstart-'));
      try {
        // A copy of the package, so pip's in-tree build leaves nothing in the checkout.
        const src = path.join(dir, 'src');
        cpSync(path.join(PACKAGE, 'pyproject.toml'), path.join(src, 'pyproject.toml'));
        cpSync(path.join(PACKAGE, 'README.md'), path.join(src, 'README.md'));
        cpSync(path.join(PACKAGE, 'switchyard'), path.join(src, 'switchyard'), { recursive: true, filter: (f) => !f.includes('__pycache__') });
        const venv = path.join(dir, 'venv');
        let res = await run(venvPython, ['-m', 'venv', '--system-site-packages', venv], {}, dir);
        assert.equal(res.code, 0, `python3 -m venv failed:\n${res.output}`);
        const vpython = path.join(venv, 'bin', 'python');
        res = await run(vpython, ['-m', 'pip', 'install', '--no-build-isolation', '--no-index', '--no-cache-dir', src], {}, dir);
        assert.equal(res.code, 0, `pip install failed:\n${res.output}`);
        res = await run(vpython, ['-c', 'import switchyard, os; print(switchyard.__file__); print(os.path.exists(os.path.join(os.path.dirname(switchyard.__file__), "py.typed")))'], {}, dir);
        assert.equal(res.code, 0, res.output);
        assert.ok(res.output.startsWith(venv), `switchyard is imported from the venv: ${res.output}`);
        assert.match(res.output, /^True$/m, 'py.typed is installed');
        // Only the client is packaged: neither the worker SDK nor the tests beside it.
        res = await run(vpython, ['-m', 'pip', 'show', '--files', 'switchyard'], {}, dir);
        assert.equal(res.code, 0, res.output);
        const files = res.output.split('Files:')[1]?.trim().split(/\s+/) ?? [];
        assert.ok(files.includes('switchyard/client.py'), res.output);
        assert.deepEqual(files.filter((f) => !/^switchyard(-[\d.]+\.dist-info)?\//.test(f)), [], res.output);

        const readme = readFileSync(path.join(PACKAGE, 'README.md'), 'utf8');
        const quickStart = readme.split('## Quick start')[1]?.match(/```python\n([\s\S]*?)```/)?.[1];
        if (!quickStart) assert.fail('the quick start has a python block');
        writeFileSync(path.join(dir, 'quickstart.py'), quickStart);
        res = await run(vpython, ['quickstart.py'], { SWITCHYARD_URL: setup!.url, SWITCHYARD_API_KEY: setup!.key }, dir);
        assert.equal(res.code, 0, `the quick start failed:\n${res.output}`);
        assert.match(res.output, /^\s*25% loading demo model$/m, res.output);
        assert.match(res.output, /^succeeded$/m, res.output);
        const urls = res.output.split('\n').filter((l) => l.startsWith(`${setup!.url}/v1/artifacts/`));
        assert.equal(urls.length, 1, res.output);
        assert.equal((await fetch(urls[0])).status, 200);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    });
  });
});

describe('Python client without a usable python3', function () {
  this.timeout(60_000);
  const exec = promisify(execFile);
  const MOCHA = path.join(ROOT, 'node_modules/mocha/bin/mocha.js');
  const args = [MOCHA, 'test/python-client.test.ts', '--grep', 'against a real gateway'];
  const env: NodeJS.ProcessEnv = { ...process.env, PYTHON_BIN: '/nonexistent/python3', PYTEST_ADDOPTS: '' };
  delete env.CI;

  it('reports the suite pending with the install command', async () => {
    const { stdout } = await exec(process.execPath, args, { cwd: ROOT, env, maxBuffer: 16 << 20 });
    assert.match(stdout, new RegExp(`pending: python3 is not installed; ${PYTHON.install}`));
    assert.doesNotMatch(stdout, /failing/);
  });

  it('fails it under CI=true', async () => {
    const failed = await exec(process.execPath, args, { cwd: ROOT, env: { ...env, CI: 'true' }, maxBuffer: 16 << 20 }).then(
      () => undefined,
      (err: { code: number; stdout: string }) => err,
    );
    assert.ok(failed && failed.code > 0, 'mocha passed although CI=true and python3 cannot run the suite');
    assert.match(failed.stdout, new RegExp(`CI=true requires python3 is not installed; ${PYTHON.install}`));
  });
});

function run(file: string, args: string[], env: Record<string, string>, cwd: string): Promise<{ code: number; output: string }> {
  return new Promise((resolve) => {
    const child = spawn(file, args, {
      cwd,
      env: { ...process.env, PYTHONDONTWRITEBYTECODE: '1', PYTHONUNBUFFERED: '1', PIP_DISABLE_PIP_VERSION_CHECK: '1', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (d) => (output += d));
    child.stderr.on('data', (d) => (output += d));
    child.on('error', (err) => resolve({ code: -1, output: `${output}${err.message}` }));
    child.on('close', (code) => resolve({ code: code ?? -1, output }));
  });
}
