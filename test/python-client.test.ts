import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { ClientTestGateway } from './helpers/client-gateway.js';
import { uniquePrefix } from './helpers/harness.js';
import { INDEX_ATTEMPT, OfflinePip, treeOf } from './helpers/offline-pip.js';
import { PYTHON, PYTHON_VENV, requireProgram } from './helpers/optional-program.js';

const ROOT = path.resolve(import.meta.dirname, '..');
const PACKAGE = path.join(ROOT, 'sdk', 'python');

/**
 * The Python client (sdk/python/switchyard) is tested by its own pytest suite
 * (sdk/python/tests), against a real gateway with demo workers for every kind and a proxy
 * that cuts event streams mid-frame; this suite starts them and reads pytest's verdict. It
 * also installs the package with the README's `pip install ./sdk/python` into a fresh venv with
 * no package index reachable, and runs the README's quick start with it as written.
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
    const offline = new OfflinePip();

    before(async function () {
      venvPython = requireProgram(this, PYTHON_VENV);
      await offline.start();
    });
    after(async () => {
      await offline.stop();
    });

    /** A fresh venv (no system packages) in dir, and its python. */
    async function freshVenv(dir: string): Promise<string> {
      const venv = path.join(dir, 'venv');
      const res = await run(venvPython, ['-m', 'venv', venv], {}, dir);
      assert.equal(res.code, 0, `python3 -m venv failed:\n${res.output}`);
      return venv;
    }

    it("`pip install ./sdk/python` in a fresh venv with no index reachable installs the client alone, and the README's quick start runs with it as written", async () => {
      const dir = mkdtempSync(path.join(os.tmpdir(), 'switchyard-py-quickstart-'));
      try {
        const venv = await freshVenv(dir);
        const vpython = path.join(venv, 'bin', 'python');
        // The README's command as written, from the checkout's root: it builds in the tree and
        // must leave nothing there.
        const before = treeOf(PACKAGE);
        let res = await offline.pip(venv, ['install', './sdk/python'], ROOT);
        assert.equal(res.code, 0, `pip install failed:\n${res.output}`);
        assert.equal(offline.connections, 0, `pip connected to the package index:\n${res.output}`);
        assert.doesNotMatch(res.output, INDEX_ATTEMPT, 'pip reached for the package index');
        assert.deepEqual(treeOf(PACKAGE), before, 'the install left files in sdk/python');
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
        assert.match(res.output, /^Requires: *$/m, 'the client has no dependencies');

        const readme = readFileSync(path.join(PACKAGE, 'README.md'), 'utf8');
        assert.match(readme, /```sh\npip install \.\/sdk\/python\n```/, 'the README documents the command tested here');
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

    it('its sdist and an editable install build offline too', async () => {
      const dir = mkdtempSync(path.join(os.tmpdir(), 'switchyard-py-sdist-'));
      try {
        const venv = await freshVenv(dir);
        const vpython = path.join(venv, 'bin', 'python');
        // pip builds no sdist; the backend's own hook does, as `python -m build` would call it.
        const hook = 'import sys, switchyard_build; print(switchyard_build.build_sdist(sys.argv[1]))';
        let res = await run(vpython, ['-c', hook, dir], { PYTHONPATH: 'worker/build_backend' }, PACKAGE);
        assert.equal(res.code, 0, res.output);
        // The sdist carries the backend it names, so it builds on its own, outside the checkout.
        res = await offline.pip(venv, ['install', path.join(dir, res.output.trim())], dir);
        assert.equal(res.code, 0, `pip install of the sdist failed:\n${res.output}`);
        assert.doesNotMatch(res.output, INDEX_ATTEMPT);
        res = await offline.pip(venv, ['install', '--editable', './sdk/python'], ROOT);
        assert.equal(res.code, 0, `pip install --editable failed:\n${res.output}`);
        assert.doesNotMatch(res.output, INDEX_ATTEMPT);
        assert.equal(offline.connections, 0, 'pip connected to the package index');
        res = await run(vpython, ['-c', 'import switchyard; print(switchyard.__file__)'], {}, dir);
        assert.equal(res.code, 0, res.output);
        assert.equal(res.output.trim(), path.join(PACKAGE, 'switchyard', '__init__.py'), 'the editable install imports the checkout');
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
