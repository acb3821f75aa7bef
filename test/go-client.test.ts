import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ClientTestGateway } from './helpers/client-gateway.js';
import { uniquePrefix } from './helpers/harness.js';
import { GO, requireProgram } from './helpers/optional-program.js';

const ROOT = path.resolve(import.meta.dirname, '..');
const MODULE = path.join(ROOT, 'sdk', 'go');

/**
 * The Go client (sdk/go) is tested by its own `go test`, against a real gateway with demo
 * workers for every kind; this suite starts them and reads go's verdict.
 */
describe('Go client (sdk/go): go test against a real gateway and demo workers', function () {
  this.timeout(240_000);
  const prefix = uniquePrefix('goclient');
  let go: string;
  let setup: ClientTestGateway | undefined;
  let goCache: string | undefined;
  let env: NodeJS.ProcessEnv;

  before(async function () {
    go = requireProgram(this, GO);
    setup = await new ClientTestGateway(prefix, 'go-client').start();
    // A cache of its own unless the caller's is set: the home directory may not be writable.
    if (!process.env.GOCACHE) goCache = mkdtempSync(path.join(os.tmpdir(), 'switchyard-gocache-'));
    env = {
      ...process.env,
      ...(goCache ? { GOCACHE: goCache } : {}),
      GOFLAGS: '-count=1',
      GOTOOLCHAIN: 'local',
      GOPROXY: 'off',
      ...setup.env,
    };
  });
  after(async () => {
    await setup?.stop();
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
    for (const name of ['TestSubmitEachKindAndWait', 'TestIdempotentReplay', 'TestListPagination', 'TestCancel', 'TestStreamResumesAfterTheConnectionIsCut', 'TestGatewayErrors', 'TestEveryGatewayCodeIsMapped', 'TestGatewayTimeout', 'TestBatchSubmitStreamListAndReplay', 'TestBatchCancelAndRefusals', 'TestFiles']) {
      assert.match(res.output, new RegExp(`--- PASS: ${name} `), `${name} did not pass:\n${res.output}`);
    }
    assert.ok(setup!.proxy!.cuts >= 2, `the proxy cut ${setup!.proxy!.cuts} streams`);
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
      const res = await runGo(go, ['run', '.'], { ...env, SWITCHYARD_URL: setup!.url, SWITCHYARD_API_KEY: setup!.key }, dir);
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

function runGo(go: string, args: string[], env: NodeJS.ProcessEnv, cwd = MODULE): Promise<{ code: number; output: string }> {
  return new Promise((resolve) => {
    execFile(go, args, { cwd, env, maxBuffer: 32 << 20 }, (err, stdout, stderr) => {
      const code = err ? (typeof (err as { code?: unknown }).code === 'number' ? ((err as { code: number }).code) : 1) : 0;
      resolve({ code, output: `${stdout}${stderr}` });
    });
  });
}
