import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { ADMIN_TOKEN, REDIS_URL, TEST_TOOL_SECRET_KEY, cleanupPrefix, uniquePrefix, until } from './helpers/harness.js';

/**
 * `npm start` and `npm run dev` as a supervisor runs them: the signal goes to npm's pid, which
 * must reach the gateway (npm runs scripts through `sh -c`, and a shell between them would
 * leave the gateway running, orphaned, when npm exits).
 */
describe('npm start and npm run dev under a supervisor', function () {
  this.timeout(90_000);
  const prefix = uniquePrefix('npm-scripts');
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'switchyard-npm-'));
  after(async () => {
    rmSync(dataDir, { recursive: true, force: true });
    await cleanupPrefix(prefix);
  });

  const env = (extra: Record<string, string> = {}) => ({ ...process.env, PORT: '0', REDIS_URL, REDIS_PREFIX: prefix, DATA_DIR: dataDir, ADMIN_TOKEN, TOOL_SECRET_KEY: TEST_TOOL_SECRET_KEY, LOG_LEVEL: 'info', DEMO_DELAY_MS: '0', ...extra });

  /** Spawns npm with its output collected; resolves once `ready` matches it. */
  async function npm(args: string[], ready: RegExp, extra: Record<string, string> = {}): Promise<{ child: ChildProcess; output: () => string; exited: Promise<[number | null, NodeJS.Signals | null]> }> {
    const child = spawn('npm', args, { env: env(extra), stdio: ['ignore', 'pipe', 'pipe'] });
    let text = '';
    child.stdout!.on('data', (d) => (text += d));
    child.stderr!.on('data', (d) => (text += d));
    const exited = once(child, 'exit') as Promise<[number | null, NodeJS.Signals | null]>;
    await until(`npm ${args.join(' ')} to be ready`, async () => ready.test(text) || child.exitCode !== null, 60_000);
    assert.equal(child.exitCode, null, text);
    return { child, output: () => text, exited };
  }

  /**
   * The gateway processes of this checkout still running (they would be orphans once npm exits).
   * Gateways that other checkouts on the machine run have another working directory.
   */
  const gatewaysLeft = async () => {
    const { execFileSync } = await import('node:child_process');
    const { readlinkSync } = await import('node:fs');
    const cwdOf = (pid: string) => {
      try {
        return readlinkSync(`/proc/${pid}/cwd`);
      } catch {
        return null; // exited meanwhile, or not ours to read
      }
    };
    return execFileSync('ps', ['-eo', 'pid,args'], { encoding: 'utf8' })
      .split('\n')
      .filter((l) => l.includes('api/bin/switchyard.mjs') && !l.includes(' ps ') && cwdOf(l.trim().split(/\s+/)[0]) === process.cwd());
  };

  for (const [script, args, ready] of [
    ['npm start', ['start'], /"msg":"gateway listening"/],
    ['npm run dev', ['run', 'dev'], /API description:/],
  ] as const) {
    for (const signal of ['SIGTERM', 'SIGINT'] as const) {
      it(`${script}: ${signal} sent to npm stops the gateway gracefully, and npm exits 0`, async () => {
        const before = await gatewaysLeft();
        const { child, output, exited } = await npm([...args], ready);
        child.kill(signal);
        const [code] = await exited;
        assert.equal(code, 0, output());
        assert.match(output(), new RegExp(`"signal":"${signal}","msg":"shutting down"`));
        assert.match(output(), /"msg":"gateway stopped"/);
        assert.deepEqual(await gatewaysLeft(), before, 'no gateway process left behind');
      });
    }
  }

  it('npm start: SIGTERM while the gateway is still starting stops it gracefully once started, and npm exits 0', async () => {
    // Redis through a gate that holds every connection until released: the gateway is provably
    // mid-start (waiting on Redis) when the signal arrives.
    const held: net.Socket[] = [];
    let open = false;
    const pipe = (client: net.Socket) => {
      const upstream = net.connect(Number(new URL(REDIS_URL).port || 6379), new URL(REDIS_URL).hostname);
      client.pipe(upstream).pipe(client);
      client.on('error', () => upstream.destroy());
      upstream.on('error', () => client.destroy());
    };
    const gate = net.createServer((client) => (open ? pipe(client) : held.push(client)));
    await new Promise<void>((r) => gate.listen(0, '127.0.0.1', r));
    try {
      const before = await gatewaysLeft();
      const redisUrl = `redis://127.0.0.1:${(gate.address() as net.AddressInfo).port}`;
      const { child, output, exited } = await npm(['start'], /./, { REDIS_URL: redisUrl });
      await until('the gateway to reach Redis', async () => held.length > 0, 60_000);
      child.kill('SIGTERM');
      await until('the signal to be taken', async () => /"signal":"SIGTERM","msg":"shutting down"/.test(output()) || child.exitCode !== null, 30_000);
      open = true;
      for (const client of held.splice(0)) pipe(client);
      const [code] = await exited;
      assert.equal(code, 0, output());
      assert.match(output(), /"msg":"gateway stopped"/);
      assert.deepEqual(await gatewaysLeft(), before, 'no gateway process left behind');
    } finally {
      gate.close();
    }
  });

  it('a port already in use is named as the PORT setting, with exit code 2 and no stack trace', async () => {
    const blocker = net.createServer();
    await new Promise<void>((r) => blocker.listen(0, '127.0.0.1', r));
    const port = (blocker.address() as net.AddressInfo).port;
    try {
      const child = spawn(process.execPath, ['api/bin/switchyard.mjs', 'serve'], { env: env({ PORT: String(port) }), stdio: ['ignore', 'pipe', 'pipe'] });
      let stderr = '';
      child.stderr!.on('data', (d) => (stderr += d));
      const [code] = (await once(child, 'exit')) as [number | null];
      assert.equal(code, 2, stderr);
      assert.match(stderr, new RegExp(`PORT ${port} on 127\\.0\\.0\\.1 is already in use`));
      assert.doesNotMatch(stderr, /\n\s+at /, 'no stack trace');
    } finally {
      blocker.close();
    }
  });
});

describe('the product runs compiled JavaScript, with no TypeScript loader', () => {
  const pkg = JSON.parse(readFileSync('package.json', 'utf8')) as { scripts: Record<string, string>; dependencies: Record<string, string>; devDependencies: Record<string, string>; workspaces: string[] };

  it('npm install builds it (prepare), npm run dev rebuilds a stale build, and tsx and tsc are development tools only', () => {
    assert.equal(pkg.scripts.build, 'node api/bin/build.mjs');
    assert.match(pkg.scripts.prepare, /^node api\/bin\/build\.mjs$/, 'npm install and npm ci run the build');
    assert.equal(pkg.scripts.predev, 'node api/bin/build.mjs --if-stale --warn-type-errors');
    for (const dep of ['tsx', 'typescript', 'esbuild']) {
      assert.ok(!(dep in pkg.dependencies), `${dep} is not a runtime dependency`);
      assert.ok(dep in pkg.devDependencies, `${dep} is a devDependency`);
    }
  });

  it('the bin, npm start and npm run dev run plain node on the build, without a loader', () => {
    for (const script of ['start', 'dev']) assert.match(pkg.scripts[script], /^exec node api\/bin\/switchyard\.mjs (serve|dev)$/);
    // The command is the bin of a workspace (api/bin), not of the root: npx runs a root's own bin
    // by installing the project into its cache first (about 250 ms more on every call).
    assert.deepEqual(pkg.workspaces, ['api/bin']);
    assert.equal(JSON.parse(readFileSync('api/bin/package.json', 'utf8')).bin.switchyard, 'switchyard.mjs');
    assert.ok(!('bin' in pkg), 'the root package has no bin');
    const launcher = readFileSync('api/bin/switchyard.mjs', 'utf8');
    assert.match(launcher, /import\('\.\.\/\.\.\/dist\/api\/main\/cli\.js'\)/);
    assert.doesNotMatch(launcher.replace(/^\s*\/\/.*$/gm, ''), /tsx|register\(|\.ts'/, 'no loader and no TypeScript file');
  });
});
