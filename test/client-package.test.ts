import assert from 'node:assert/strict';
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { createReadStream, mkdirSync, mkdtempSync, readFileSync, readdirSync, realpathSync, rmSync, statSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { build as esbuild } from 'esbuild';
import { chromium, type Browser } from 'playwright-core';
import { SDK_VERSION } from '../sdk/worker/index.js';
import { CHROMIUM, requireProgram } from './helpers/optional-program.js';
import { TestGateway, cleanupPrefix, uniquePrefix, until } from './helpers/harness.js';

/**
 * The SDKs as their users get them: `npm pack` of sdk/client and sdk/worker (the compiled
 * JavaScript and declarations of api/bin/build.mjs), installed from the tarballs into an empty
 * directory outside the repository (no registry: their dependencies are packed from this
 * checkout's node_modules), then used with plain `node` (a worker of the worker package serving
 * the README's client example, run as written; the worker bundled by esbuild for Node) and in
 * Chromium (a page that submits and streams, bundled by esbuild, and the same page loading the
 * compiled ES modules through an import map).
 */

const ROOT = path.resolve(import.meta.dirname, '..');
const KIND = 'inference:image:generate';
const execFileAsync = promisify(execFile);

async function npm(args: string[], cwd: string): Promise<string> {
  const { stdout } = await execFileAsync('npm', [...args, '--no-audit', '--no-fund', '--loglevel=error'], { cwd, env: { ...process.env, npm_config_update_notifier: 'false' } });
  return stdout;
}

/** `npm pack` of a package directory into `dest`; the tarball's path and its file list. */
async function pack(dir: string, dest: string): Promise<{ tarball: string; files: string[] }> {
  // The build is fresh (test/helpers/fresh-build.ts): the prepack script would only check that again.
  const [info] = JSON.parse(await npm(['pack', dir, '--json', '--ignore-scripts', '--pack-destination', dest], dest)) as Array<{ filename: string; files: Array<{ path: string }> }>;
  return { tarball: path.join(dest, info.filename), files: info.files.map((f) => f.path) };
}

/** The ```js block of the README's "Client library" section. */
function readmeClientExample(): string {
  const readme = readFileSync(path.join(ROOT, 'README.md'), 'utf8');
  const section = readme.slice(readme.indexOf('## Client library'), readme.indexOf('\n## ', readme.indexOf('## Client library') + 1));
  const code = /```js\n([\s\S]*?)```/.exec(section)?.[1];
  assert.ok(code, 'the README has a js example in "Client library"');
  return code;
}

/** Runs `node file` in `cwd` to its end; its exit code and output. */
async function runNode(file: string, cwd: string, env: Record<string, string>, timeoutMs = 60_000): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, [file], { cwd, env: { PATH: process.env.PATH ?? '', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d) => (stdout += d));
  child.stderr.on('data', (d) => (stderr += d));
  const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
  const [code] = (await once(child, 'exit')) as [number | null];
  clearTimeout(timer);
  return { code, stdout, stderr };
}

/** Every .js file under a directory. */
const jsFiles = (dir: string): string[] =>
  readdirSync(dir).flatMap((name) => {
    const p = path.join(dir, name);
    return statSync(p).isDirectory() ? jsFiles(p) : p.endsWith('.js') ? [p] : [];
  });

/** Static imports and re-exports of a compiled module. */
const importsOf = (src: string) => [...src.matchAll(/^\s*(?:import|export)\s[^;]*?from\s*['"]([^'"]+)['"]|^\s*import\s+['"]([^'"]+)['"]/gm)].map((m) => m[1] ?? m[2]);

describe('SDK packages (npm pack of sdk/client and sdk/worker, installed from the tarballs)', function () {
  this.timeout(180_000);
  const prefix = uniquePrefix('sdk-pkg');
  const work = mkdtempSync(path.join(os.tmpdir(), 'switchyard-sdk-pkg-'));
  const app = path.join(work, 'app');
  let gw: TestGateway;
  let key: string;
  let workerProcess: ChildProcess | undefined;
  let clientFiles: string[];
  let workerFiles: string[];

  before(async () => {
    const tarballs = path.join(work, 'tarballs');
    mkdirSync(tarballs);
    mkdirSync(app);
    writeFileSync(path.join(app, 'package.json'), JSON.stringify({ name: 'sdk-user', private: true, type: 'module' }));
    const client = await pack(path.join(ROOT, 'sdk/client'), tarballs);
    const worker = await pack(path.join(ROOT, 'sdk/worker'), tarballs);
    clientFiles = client.files;
    workerFiles = worker.files;
    // Their dependencies, packed from this checkout so the install needs no registry.
    const deps = await Promise.all(['jose', 'eventsource-parser', 'ws'].map(async (name) => (await pack(realpathSync(path.join(ROOT, 'node_modules', name)), tarballs)).tarball));
    await npm(['install', '--offline', '--ignore-scripts', client.tarball, worker.tarball, ...deps], app);

    gw = await new TestGateway(prefix).start();
    ({ key } = await gw.account(10_000));
    const token = await gw.accountWorkerToken(key);
    // A worker made of the worker package alone, run by plain node from outside the repository.
    writeFileSync(
      path.join(app, 'worker.mjs'),
      `import { SwitchyardWorker, silentLogger } from '@switchyard/worker';
import { createDemoEngine } from '@switchyard/worker/engines/demo';
const worker = new SwitchyardWorker({ gateway: process.env.GATEWAY, token: process.env.TOKEN, kinds: [${JSON.stringify(KIND)}], slots: 4,
  handler: createDemoEngine({ delayMs: 400 }), logger: silentLogger, progressIntervalMs: 0 });
await worker.start();
console.log('worker started');
process.on('SIGTERM', () => worker.stop({ timeoutMs: 0 }).then(() => process.exit(0)));
`,
    );
    workerProcess = spawn(process.execPath, ['worker.mjs'], { cwd: app, env: { PATH: process.env.PATH ?? '', GATEWAY: gw.url, TOKEN: token }, stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    workerProcess.stdout!.on('data', (d) => (out += d));
    await until('the packaged worker to start', async () => out.includes('worker started') || workerProcess!.exitCode !== null, 30_000);
    assert.equal(workerProcess.exitCode, null, 'the packaged worker runs');
  });

  after(async () => {
    if (workerProcess && workerProcess.exitCode === null) {
      workerProcess.kill('SIGTERM');
      await once(workerProcess, 'exit');
    }
    await gw?.stop();
    await cleanupPrefix(prefix);
    rmSync(work, { recursive: true, force: true });
  });

  it('ship compiled JavaScript with declarations and nothing of the gateway; the client package has no Node module on its static import graph', () => {
    for (const [name, files, entry] of [
      ['client', clientFiles, 'dist/client/index'],
      ['worker', workerFiles, 'dist/worker/index'],
    ] as const) {
      assert.ok(files.includes(`${entry}.js`) && files.includes(`${entry}.d.ts`), `${name}: ${entry}.js and .d.ts`);
      assert.ok(files.includes('package.json') && files.includes('README.md'), `${name}: package.json and README.md`);
      const stray = files.filter((f) => !(f === 'package.json' || f === 'README.md' || (f.startsWith('dist/') && /\.(js|d\.ts)$/.test(f))));
      assert.deepEqual(stray, [], `${name}: only the compiled files`);
      assert.ok(!files.some((f) => /^dist\/(api|dispatch|queues|models)\//.test(f) || f.endsWith('.ts') && !f.endsWith('.d.ts')), `${name}: no gateway code, no TypeScript source`);
    }
    // The client is its own files and the attestation checks it shares with the gateway.
    assert.deepEqual([...new Set(clientFiles.filter((f) => f.startsWith('dist/')).map((f) => f.split('/')[1]))].sort(), ['attestation', 'client']);
    const installed = path.join(app, 'node_modules/@switchyard/client');
    const manifest = JSON.parse(readFileSync(path.join(installed, 'package.json'), 'utf8')) as { dependencies: Record<string, string>; exports: Record<string, unknown> };
    assert.deepEqual(Object.keys(manifest.dependencies).sort(), ['eventsource-parser', 'jose']);
    for (const file of jsFiles(path.join(installed, 'dist'))) {
      for (const spec of importsOf(readFileSync(file, 'utf8'))) {
        assert.ok(spec.startsWith('.') || spec === 'jose' || spec === 'eventsource-parser', `${path.relative(installed, file)} imports ${spec}`);
      }
    }
    const workerManifest = JSON.parse(readFileSync(path.join(app, 'node_modules/@switchyard/worker/package.json'), 'utf8')) as { version: string; dependencies: Record<string, string> };
    assert.deepEqual(Object.keys(workerManifest.dependencies).sort(), ['jose', 'ws']);
    // The version a worker registers with (its software.sdk_version) is the package's.
    assert.equal(workerManifest.version, SDK_VERSION);
  });

  it('a plain node script imports the client package by name; its internals stay private (exports)', async () => {
    writeFileSync(
      path.join(app, 'exports.mjs'),
      `import * as sdk from '@switchyard/client';
console.log(JSON.stringify({ client: typeof sdk.SwitchyardClient, apiError: typeof sdk.SwitchyardApiError, verify: typeof sdk.verifyAttestation }));
try { await import('@switchyard/client/dist/client/local-file.js'); console.log('deep import allowed'); } catch (err) { console.log(err.code); }
`,
    );
    const r = await runNode('exports.mjs', app, {});
    assert.equal(r.code, 0, r.stderr);
    const [first, second] = r.stdout.trim().split('\n');
    assert.deepEqual(JSON.parse(first), { client: 'function', apiError: 'function', verify: 'function' });
    assert.equal(second, 'ERR_PACKAGE_PATH_NOT_EXPORTED');
  });

  it('types resolve through the exports map: a TypeScript consumer typechecks against the installed packages', async () => {
    writeFileSync(
      path.join(app, 'consumer.ts'),
      `import { SwitchyardClient, SwitchyardApiError, type JobEvent, type JobResult } from '@switchyard/client';
import { SwitchyardWorker, type WorkerHandler } from '@switchyard/worker';
import { createDemoEngine } from '@switchyard/worker/engines/demo';
const sy = new SwitchyardClient({ baseUrl: 'http://127.0.0.1:8080', apiKey: 'k' });
export async function first(runId: string): Promise<JobEvent | undefined> { for await (const ev of sy.stream(runId)) return ev; }
export const done = (job: JobResult): boolean => job.terminal;
export const isApi = (e: unknown) => e instanceof SwitchyardApiError && e.status === 404;
const handler: WorkerHandler = createDemoEngine({ delayMs: 0 });
export const worker = new SwitchyardWorker({ gateway: 'http://127.0.0.1:8080', token: 't', kinds: ['inference:image:generate'], handler });
// @ts-expect-error: the client's options are typed
new SwitchyardClient({ baseUrl: 42 });
`,
    );
    writeFileSync(
      path.join(app, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: { target: 'ES2023', module: 'NodeNext', moduleResolution: 'NodeNext', lib: ['ES2023', 'DOM', 'DOM.Iterable'], strict: true, noEmit: true, skipLibCheck: true, typeRoots: [path.join(ROOT, 'node_modules/@types')], types: ['node'] },
        files: ['consumer.ts'],
      }),
    );
    const tsc = path.join(ROOT, 'node_modules/typescript/bin/tsc');
    const r = await execFileAsync(process.execPath, [tsc, '-p', path.join(app, 'tsconfig.json')], { cwd: app }).catch((err: { stdout: string; stderr: string }) => err);
    assert.equal((r as { stdout: string }).stdout.trim(), '', 'tsc reports no error');
  });

  it("runs the README's client example as written with plain node: submits, streams progress, waits, prints the artifact URLs", async () => {
    writeFileSync(path.join(app, 'readme-example.mjs'), readmeClientExample());
    const r = await runNode('readme-example.mjs', app, { SWITCHYARD_URL: gw.url, SWITCHYARD_API_KEY: key });
    assert.equal(r.code, 0, `${r.stdout}\n${r.stderr}`);
    assert.match(r.stdout, /^0\.\d+ /m, 'progress events printed as they came');
    assert.match(r.stdout, /^true \[\s*'http:\/\/127\.0\.0\.1:\d+\/v1\/artifacts\//m, 'the finished job with its artifact URLs');
  });

  it('the worker package bundled by esbuild for Node runs on its own, from a directory without node_modules', async () => {
    const alone = path.join(work, 'bundled');
    mkdirSync(alone);
    // ws is CommonJS: the usual banner gives the ES module bundle a require for Node's built-ins.
    await esbuild({
      entryPoints: [path.join(app, 'worker.mjs')], absWorkingDir: app, bundle: true, platform: 'node', format: 'esm', outfile: path.join(alone, 'worker.mjs'), logLevel: 'silent',
      banner: { js: "import { createRequire } from 'node:module'; const require = createRequire(import.meta.url);" },
    });
    const token = await gw.accountWorkerToken(key);
    const child = spawn(process.execPath, ['worker.mjs'], { cwd: alone, env: { PATH: process.env.PATH ?? '', GATEWAY: gw.url, TOKEN: token }, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (out += d));
    try {
      await until('the bundled worker to register', async () => out.includes('worker started') || child.exitCode !== null, 30_000);
      assert.equal(child.exitCode, null, out);
    } finally {
      child.kill('SIGTERM');
      await once(child, 'exit');
    }
  });

  describe('in Chromium', () => {
    let browser: Browser;
    let site: http.Server;
    let origin: string;
    let bundle: string;

    before(async function () {
      const executablePath = requireProgram(this, CHROMIUM);
      // The page's script: what an application would write.
      writeFileSync(
        path.join(app, 'page.mjs'),
        `import { SwitchyardClient } from '@switchyard/client';
const sy = new SwitchyardClient({ baseUrl: location.origin, apiKey: new URLSearchParams(location.search).get('key') });
window.result = (async () => {
  const run = await sy.submit({ kind: ${JSON.stringify(KIND)}, input: { prompt: 'a lighthouse, from a browser' } });
  const events = [];
  for await (const ev of sy.stream(run.run_id)) {
    events.push(ev.event);
    document.body.insertAdjacentText('beforeend', ev.event + ' ');
  }
  const job = await sy.get(run.run_id);
  return { runId: run.run_id, events, status: job.status, terminal: job.terminal, urls: job.output?.urls ?? [] };
})();
`,
      );
      // A bundler's view of the package: esbuild, for browsers, from the installed package.
      const built = await esbuild({ entryPoints: [path.join(app, 'page.mjs')], absWorkingDir: app, bundle: true, format: 'esm', platform: 'browser', write: false, logLevel: 'silent' });
      bundle = built.outputFiles[0].text;
      // Same origin as the API (the gateway sends no CORS headers for /v1/jobs): a server that
      // serves the pages and passes everything else to the gateway, as a reverse proxy would.
      const gateway = new URL(gw.url);
      const importMap = { imports: { '@switchyard/client': '/node_modules/@switchyard/client/dist/client/index.js', jose: '/node_modules/jose/dist/webapi/index.js', 'eventsource-parser': '/node_modules/eventsource-parser/dist/index.js' } };
      const pages: Record<string, string> = {
        '/bundled.html': '<!doctype html><meta charset="utf-8"><title>bundled</title><body><script type="module" src="/bundle.js"></script>',
        '/modules.html': `<!doctype html><meta charset="utf-8"><title>modules</title><script type="importmap">${JSON.stringify(importMap)}</script><body><script type="module" src="/page.mjs"></script>`,
      };
      site = http.createServer((req, res) => {
        const url = new URL(req.url ?? '/', 'http://x');
        if (url.pathname === '/favicon.ico') return void res.writeHead(204).end();
        if (pages[url.pathname]) return void res.writeHead(200, { 'content-type': 'text/html' }).end(pages[url.pathname]);
        if (url.pathname === '/bundle.js') return void res.writeHead(200, { 'content-type': 'text/javascript' }).end(bundle);
        if (url.pathname === '/page.mjs' || url.pathname.startsWith('/node_modules/')) {
          const file = path.join(app, path.normalize(url.pathname));
          if (!file.startsWith(app + path.sep)) return void res.writeHead(404).end();
          res.writeHead(200, { 'content-type': 'text/javascript' });
          return void createReadStream(file).on('error', () => res.destroy()).pipe(res);
        }
        const upstream = http.request({ host: gateway.hostname, port: gateway.port, method: req.method, path: req.url, headers: { ...req.headers, host: gateway.host } }, (answer) => {
          res.writeHead(answer.statusCode ?? 502, answer.headers);
          answer.pipe(res);
        });
        upstream.on('error', () => res.destroy());
        req.pipe(upstream);
      });
      await new Promise<void>((r) => site.listen(0, '127.0.0.1', r));
      origin = `http://127.0.0.1:${(site.address() as AddressInfo).port}`;
      browser = await chromium.launch({ executablePath, args: ['--no-sandbox'] });
    });

    after(async () => {
      await browser?.close();
      site?.closeAllConnections();
      await new Promise<void>((r) => (site ? site.close(() => r()) : r()));
    });

    it('the bundle has no Node module in it (the local-file reader stays a lazy import browsers never make)', () => {
      assert.doesNotMatch(bundle, /from\s*["']node:|require\(["']node:/);
      assert.match(bundle, /node:fs\/promises/, 'the specifier is only a string, for Node');
    });

    for (const [name, page] of [
      ['bundled by esbuild', '/bundled.html'],
      ['as the compiled ES modules, through an import map (no bundler)', '/modules.html'],
    ] as const) {
      it(`a page with the client ${name} submits a job and streams its events to done`, async () => {
        const tab = await browser.newPage();
        const errors: string[] = [];
        tab.on('pageerror', (err) => errors.push(err.message));
        tab.on('console', (msg) => msg.type() === 'error' && errors.push(msg.text()));
        try {
          await tab.goto(`${origin}${page}?key=${encodeURIComponent(key)}`);
          await tab.waitForFunction(() => 'result' in globalThis, undefined, { timeout: 20_000 });
          const result = (await tab.evaluate(() => (globalThis as unknown as { result: Promise<unknown> }).result)) as { runId: string; events: string[]; status: string; terminal: boolean; urls: string[] };
          assert.match(result.runId, /^run_/);
          assert.equal(result.events[0], 'status');
          assert.ok(result.events.includes('progress'), `progress streamed: ${result.events.join(' ')}`);
          assert.equal(result.events.at(-1), 'done');
          assert.equal(result.status, 'succeeded');
          assert.equal(result.terminal, true);
          assert.match(result.urls[0] ?? '', /\/v1\/artifacts\//);
          assert.deepEqual(errors, []);
        } finally {
          await tab.close();
        }
      });
    }
  });
});
