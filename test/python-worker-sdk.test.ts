import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { GatewayProcess } from './helpers/gateway-process.js';
import { ADMIN_TOKEN, cleanupPrefix, uniquePrefix } from './helpers/harness.js';
import { INDEX_ATTEMPT, OfflinePip, treeOf } from './helpers/offline-pip.js';
import { PYTHON, PYTHON_WORKER_VENV, requireProgram } from './helpers/optional-program.js';
import { TcpProxy } from './helpers/tcp-proxy.js';

const ROOT = path.resolve(import.meta.dirname, '..');

/**
 * The Python worker SDK (sdk/python/worker/) against real gateways: its pytest suite (sdk/python/worker/tests/)
 * runs against two `switchyard serve` processes on one Redis prefix and DATA_DIR behind a TCP
 * load balancer, and drives them through a small control server of this test (kill -9, SIGTERM,
 * restart, which instance the balancer sends new connections to), so the suite can restart a
 * gateway, have it drain its workers or hand their leases over to the other instance.
 */
describe('Python worker SDK against real gateways (pytest sdk/python/worker/tests)', function () {
  this.timeout(600_000);
  let python: string;

  before(function () {
    python = requireProgram(this, PYTHON);
  });

  it('passes: every kind, input files, uploads, cancel, kill -9 of a worker, gateway restart, drain and lease handover', async () => {
    const prefix = uniquePrefix('python-sdk');
    const dataDir = mkdtempSync(path.join(tmpdir(), 'sy-python-sdk-'));
    const lb = await new TcpProxy().listen();
    const env = { REDIS_PREFIX: prefix, PUBLIC_URL: lb.url, DATA_DIR: dataDir, HEARTBEAT_MS: '300', LEASE_TTL_MS: '3000', SHUTDOWN_DRAIN_MS: '30000' };
    const gateways: Record<string, GatewayProcess> = {};
    const running = (name: string) => {
      const g = gateways[name];
      return !!g && g.child.exitCode === null && g.child.signalCode === null;
    };
    const start = async (name: string) => {
      if (!running(name)) gateways[name] = await new GatewayProcess(env).start();
      return gateways[name];
    };
    const state = () => ({
      gateways: Object.fromEntries(Object.entries(gateways).map(([n, g]) => [n, { port: g.port, url: g.url, running: running(n), exit: g.child.exitCode ?? g.child.signalCode }])),
      targets: lb.targets.map((port) => Object.keys(gateways).find((n) => gateways[n].port === port) ?? port),
    });

    const control = http.createServer((req, res) => {
      let raw = '';
      req.on('data', (d) => (raw += d));
      req.on('end', () => {
        void (async () => {
          const url = new URL(req.url!, 'http://control');
          const body = raw ? JSON.parse(raw) : {};
          const [, area, name, action] = url.pathname.split('/');
          const g = gateways[name];
          if (req.method === 'GET' && area === 'state') return state();
          if (req.method === 'POST' && area === 'reset') {
            await Promise.all(['a', 'b'].map(start));
            lb.targets = [gateways.a.port];
            return state();
          }
          if (req.method === 'POST' && area === 'lb') {
            lb.targets = (body.targets as string[]).map((n) => gateways[n].port);
            return state();
          }
          if (area === 'gateway' && (action === 'start' || g)) {
            if (action === 'start') return (await start(name), state());
            if (action === 'kill') return (await g.kill(), state());
            if (action === 'term') return (g.signal('SIGTERM'), state());
            if (action === 'wait-exit') return await g.exited;
            if (action === 'logged') return g.logged(url.searchParams.get('msg') ?? '');
          }
          throw Object.assign(new Error(`no such control: ${req.method} ${url.pathname}`), { status: 404 });
        })().then(
          (answer) => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(answer ?? null)),
          (err: Error & { status?: number }) => res.writeHead(err.status ?? 500, { 'content-type': 'application/json' }).end(JSON.stringify({ error: err.message })),
        );
      });
    });
    await new Promise<void>((r) => control.listen(0, '127.0.0.1', () => r()));

    try {
      await Promise.all(['a', 'b'].map(start));
      lb.targets = [gateways.a.port];
      const admin = async (p: string, body: unknown) => {
        const res = await fetch(`${lb.url}${p}`, { method: 'POST', headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' }, body: JSON.stringify(body) });
        assert.equal(res.status, 201, await res.clone().text());
        return (await res.json()) as Record<string, any>;
      };
      const account = await admin('/v1/admin/accounts', { name: 'python-sdk', credits: 1_000_000 });
      const operator = await admin('/v1/admin/operators', { name: 'python-fleet', trust: 'open' });

      const child = spawn(python, ['-m', 'pytest', 'sdk/python/worker/tests', '-q', '-rs', '-p', 'no:cacheprovider'], {
        cwd: ROOT,
        env: {
          ...process.env,
          PYTHONDONTWRITEBYTECODE: '1',
          PYTHONUNBUFFERED: '1',
          SWITCHYARD_GATEWAY: lb.url,
          SWITCHYARD_WORKER_TOKEN: operator.worker_token,
          SWITCHYARD_API_KEY: account.api_key,
          SWITCHYARD_TEST_CONTROL: `http://127.0.0.1:${(control.address() as AddressInfo).port}`,
        },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let output = '';
      child.stdout!.on('data', (d) => (output += d));
      child.stderr!.on('data', (d) => (output += d));
      const code = await new Promise<number | null>((r) => child.on('exit', (c) => r(c)));
      assert.equal(code, 0, `pytest failed (exit ${code}):\n${output}`);
      assert.match(output, /\d+ passed/, output);
      if (process.env.PYTEST_ADDOPTS) console.log(output); // a developer choosing tests sees what ran
      assert.doesNotMatch(output, /skipped|xfail|deselected/, `no test of the suite may be skipped here:\n${output}`);
    } finally {
      control.closeAllConnections();
      await new Promise<void>((r) => control.close(() => r()));
      await Promise.all(Object.values(gateways).map((g) => g.kill()));
      await lb.close();
      await cleanupPrefix(prefix);
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});

describe('Python worker SDK installed with pip', function () {
  this.timeout(120_000);
  const offline = new OfflinePip();
  let python: string;

  before(async function () {
    python = requireProgram(this, PYTHON_WORKER_VENV);
    await offline.start();
  });
  after(async () => {
    await offline.stop();
  });

  it('`pip install ./sdk/python/worker` with no index reachable installs the package, its websockets taken from the system', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'sy-python-sdk-install-'));
    try {
      // A venv that sees the system's packages: websockets comes from Debian's python3-websockets.
      const venv = path.join(dir, 'venv');
      await promisify(execFile)(python, ['-m', 'venv', '--system-site-packages', venv]);
      const readme = readFileSync(path.join(ROOT, 'sdk/python/worker/README.md'), 'utf8');
      assert.match(readme, /^pip install \.\/sdk\/python\/worker /m, 'the README documents the command tested here');
      const before = treeOf(path.join(ROOT, 'sdk/python'));
      let res = await offline.pip(venv, ['install', './sdk/python/worker'], ROOT);
      assert.equal(res.code, 0, `pip install failed:\n${res.output}`);
      assert.equal(offline.connections, 0, `pip connected to the package index:\n${res.output}`);
      assert.doesNotMatch(res.output, INDEX_ATTEMPT, 'pip reached for the package index');
      assert.match(res.output, /Requirement already satisfied: websockets/, res.output);
      assert.deepEqual(treeOf(path.join(ROOT, 'sdk/python')), before, 'the install left files in sdk/python');

      const check = 'import os, switchyard_worker; d = os.path.dirname(switchyard_worker.__file__); print(d); print(os.path.exists(os.path.join(d, "py.typed")))';
      const { stdout } = await promisify(execFile)(path.join(venv, 'bin', 'python'), ['-c', check], { env: { ...process.env, PYTHONDONTWRITEBYTECODE: '1' } });
      assert.ok(stdout.startsWith(venv), `switchyard_worker is imported from the venv: ${stdout}`);
      assert.match(stdout, /^True$/m, 'py.typed is installed');
      res = await offline.pip(venv, ['show', '--files', 'switchyard-worker'], dir);
      assert.match(res.output, /^Requires: websockets$/m, res.output);
      const files = res.output.split('Files:')[1]?.trim().split(/\s+/) ?? [];
      assert.ok(files.includes('switchyard_worker/worker.py'), res.output);
      // The package alone: not its tests, not the build backend beside it.
      assert.deepEqual(files.filter((f) => !/^switchyard_worker(-[\d.]+\.dist-info)?\//.test(f)), [], res.output);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('Python worker SDK without a usable python3', function () {
  this.timeout(60_000);
  const run = promisify(execFile);
  const MOCHA = path.join(ROOT, 'node_modules/mocha/bin/mocha.js');
  // A python3 that cannot import websockets and pytest is as good as none.
  const args = [MOCHA, 'test/python-worker-sdk.test.ts', '--grep', 'against real gateways'];
  const env: NodeJS.ProcessEnv = { ...process.env, PYTHON_BIN: '/nonexistent/python3', PYTEST_ADDOPTS: '' };
  delete env.CI;

  it('reports the suite pending with the install command', async () => {
    const { stdout } = await run(process.execPath, args, { cwd: ROOT, env, maxBuffer: 16 << 20 });
    assert.match(stdout, /pending: python3 is not installed; apt-get install -y python3-websockets python3-pytest/);
    assert.doesNotMatch(stdout, /failing/);
  });

  it('fails it under CI=true', async () => {
    const failed = await run(process.execPath, args, { cwd: ROOT, env: { ...env, CI: 'true' }, maxBuffer: 16 << 20 }).then(
      () => undefined,
      (err: { code: number; stdout: string }) => err,
    );
    assert.ok(failed && failed.code > 0, 'mocha passed although CI=true and python3 cannot run the suite');
    assert.match(failed.stdout, /CI=true requires python3 is not installed; apt-get install -y python3-websockets python3-pytest/);
  });
});
