import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import net, { type AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { createDemoEngine } from '../sdk/engines/demo/index.js';
import { SwitchyardWorker, silentLogger } from '../sdk/worker/index.js';
import { TestGateway, cleanupPrefix, uniquePrefix } from './helpers/harness.js';
import { GO, requireProgram } from './helpers/optional-program.js';

const ROOT = path.resolve(import.meta.dirname, '..');
const MODULE = path.join(ROOT, 'sdk', 'go');
// Small limits, so the Go tests can meet 413 and 409 quota_exceeded on uploads quickly.
const FILE_MAX_BYTES = 64 * 1024;
const FILE_QUOTA_BYTES = 160 * 1024;

/**
 * A TCP proxy to the gateway that cuts every events connection sent without Last-Event-ID in
 * the middle of its first `progress` frame (the bytes before it pass, then both sockets are
 * destroyed). A reconnect carries Last-Event-ID and passes whole, so each stream is cut once,
 * whatever the number of Go tests that use the proxy.
 */
class CuttingProxy {
  cuts = 0;
  private readonly open = new Set<net.Socket>();
  private readonly server = net.createServer((client) => this.pipe(client));

  constructor(private readonly targetPort: number) {}

  async start(): Promise<string> {
    await new Promise<void>((r) => this.server.listen(0, '127.0.0.1', () => r()));
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  private pipe(client: net.Socket): void {
    const upstream = net.connect(this.targetPort, '127.0.0.1');
    this.open.add(client);
    client.once('close', () => this.open.delete(client));
    let armed = false;
    let seen = ''; // latin1, so string offsets are byte offsets
    client.on('data', (d: Buffer) => {
      const head = d.toString('latin1');
      if (/^GET \/v1\/jobs\/[^ ]+\/events/.test(head)) armed = !/\r\nlast-event-id:/i.test(head.split('\r\n\r\n')[0]);
      upstream.write(d);
    });
    upstream.on('data', (d: Buffer) => {
      if (!armed) return void client.write(d);
      const before = seen.length;
      seen += d.toString('latin1');
      const at = seen.indexOf('event: progress');
      if (at < 0) return void client.write(d);
      armed = false;
      this.cuts++;
      client.write(d.subarray(0, Math.max(0, at + 8 - before)), () => {
        client.destroy();
        upstream.destroy();
      });
    });
    client.on('error', () => upstream.destroy());
    upstream.on('error', () => client.destroy());
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
  }

  async stop(): Promise<void> {
    for (const s of this.open) s.destroy();
    await new Promise<void>((r) => this.server.close(() => r()));
  }
}

/**
 * The Go client (sdk/go) is tested by its own `go test`, against a real gateway with demo
 * workers for every kind; this suite starts them and reads go's verdict.
 */
describe('Go client (sdk/go): go test against a real gateway and demo workers', function () {
  this.timeout(240_000);
  const prefix = uniquePrefix('goclient');
  let go: string;
  let gw: TestGateway | undefined;
  let worker: SwitchyardWorker | undefined;
  let proxy: CuttingProxy | undefined;
  let goCache: string | undefined;
  let env: NodeJS.ProcessEnv;
  let key: string;

  before(async function () {
    go = requireProgram(this, GO);
    gw = await new TestGateway(prefix, { FILE_MAX_BYTES: `${FILE_MAX_BYTES}b`, FILE_QUOTA_BYTES: `${FILE_QUOTA_BYTES}b` }).start();
    ({ key } = await gw.account(100_000, 'go-client'));
    // One credit: less than any kind but the llm's, and no files yet, for 402 and the quota.
    const { key: poorKey } = await gw.account(1, 'go-client-poor');
    // Long enough for a stream to see progress frames (quarter steps), short for the suite.
    worker = new SwitchyardWorker({
      gateway: gw.url,
      token: await gw.accountWorkerToken(key),
      kinds: 'all',
      slots: 4,
      handler: createDemoEngine({ delayMs: 400, espeakNg: null, pocketsphinx: null }),
      logger: silentLogger,
      progressIntervalMs: 0,
    });
    await worker.start();
    proxy = new CuttingProxy(Number(new URL(gw.url).port));
    const proxyUrl = await proxy.start();
    // A cache of its own unless the caller's is set: the home directory may not be writable.
    if (!process.env.GOCACHE) goCache = mkdtempSync(path.join(os.tmpdir(), 'switchyard-gocache-'));
    env = {
      ...process.env,
      ...(goCache ? { GOCACHE: goCache } : {}),
      GOFLAGS: '-count=1',
      GOTOOLCHAIN: 'local',
      GOPROXY: 'off',
      SWITCHYARD_TEST_URL: gw.url,
      SWITCHYARD_TEST_KEY: key,
      SWITCHYARD_TEST_POOR_KEY: poorKey,
      SWITCHYARD_TEST_PROXY_URL: proxyUrl,
      SWITCHYARD_TEST_FILE_MAX_BYTES: String(FILE_MAX_BYTES),
      SWITCHYARD_TEST_QUOTA_BYTES: String(FILE_QUOTA_BYTES),
    };
  });
  after(async () => {
    await worker?.stop({ timeoutMs: 0 });
    await proxy?.stop();
    await gw?.stop();
    await cleanupPrefix(prefix);
    if (goCache) rmSync(goCache, { recursive: true, force: true });
  });

  it('go vet is clean', async () => {
    const res = await runGo(go, ['vet', './...'], env);
    assert.equal(res.code, 0, `go vet failed:\n${res.output}`);
  });

  it('go test passes, with every gateway test run (none skipped) and the stream cut by the proxy', async () => {
    const res = await runGo(go, ['test', '-v', '-timeout', '180s', './...'], env);
    assert.equal(res.code, 0, `go test failed:\n${res.output}`);
    assert.doesNotMatch(res.output, /--- SKIP/, `a Go test skipped although the suite set every variable:\n${res.output}`);
    for (const name of ['TestSubmitEachKindAndWait', 'TestIdempotentReplay', 'TestListPagination', 'TestCancel', 'TestStreamResumesAfterTheConnectionIsCut', 'TestGatewayErrors', 'TestEveryGatewayCodeIsMapped', 'TestGatewayTimeout']) {
      assert.match(res.output, new RegExp(`--- PASS: ${name} `), `${name} did not pass:\n${res.output}`);
    }
    assert.ok(proxy!.cuts >= 2, `the proxy cut ${proxy!.cuts} streams`);
  });

  it("the README's quick start builds and runs as it is: a job submitted, streamed, waited for, its artifact URLs printed", async () => {
    const readme = readFileSync(path.join(MODULE, 'README.md'), 'utf8');
    const quickStart = readme.split('## Quick start')[1]?.match(/```go\n([\s\S]*?)```/)?.[1];
    if (!quickStart || !quickStart.includes('func main()')) assert.fail('the quick start is a whole main.go');
    const dir = mkdtempSync(path.join(os.tmpdir(), 'switchyard-go-quickstart-'));
    try {
      writeFileSync(path.join(dir, 'main.go'), quickStart);
      // The README's own go.mod lines for a local checkout, pointed at this one.
      writeFileSync(
        path.join(dir, 'go.mod'),
        `module example.com/quickstart\n\ngo 1.19\n\nrequire github.com/switchyard-dev/switchyard/sdk/go v0.0.0\n\nreplace github.com/switchyard-dev/switchyard/sdk/go => ${MODULE}\n`,
      );
      const res = await runGo(go, ['run', '.'], { ...env, SWITCHYARD_URL: gw!.url, SWITCHYARD_API_KEY: key }, dir);
      assert.equal(res.code, 0, `the quick start failed:\n${res.output}`);
      assert.match(res.output, /^\s*25% loading demo model$/m, res.output);
      assert.match(res.output, /^succeeded$/m, res.output);
      const urls = res.output.split('\n').filter((l) => l.startsWith(`${gw!.url}/v1/artifacts/`));
      assert.equal(urls.length, 1, res.output);
      assert.equal((await fetch(urls[0])).status, 200);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

function runGo(go: string, args: string[], env: NodeJS.ProcessEnv, cwd = MODULE): Promise<{ code: number; output: string }> {
  return new Promise((resolve) => {
    execFile(go, args, { cwd, env, maxBuffer: 32 << 20 }, (err, stdout, stderr) => {
      const code = err ? (typeof (err as { code?: unknown }).code === 'number' ? ((err as { code: number }).code) : 1) : 0;
      resolve({ code, output: `${stdout}${stderr}` });
    });
  });
}
