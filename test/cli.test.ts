import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { promisify } from 'node:util';
import { REDIS_URL, TEST_TOOL_SECRET_KEY, TestGateway, cleanupPrefix, uniquePrefix } from './helpers/harness.js';

const run = promisify(execFile);
const BIN = 'api/bin/switchyard.mjs';

async function cli(args: string[], env: Record<string, string> = {}) {
  try {
    const { stdout, stderr } = await run(process.execPath, [BIN, ...args], { env: { ...process.env, ...env } });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

describe('switchyard CLI', () => {
  const prefix = uniquePrefix('cli');
  const env = { REDIS_URL, REDIS_PREFIX: prefix, TOOL_SECRET_KEY: TEST_TOOL_SECRET_KEY };
  after(async () => cleanupPrefix(prefix));

  it('creates an account whose key works on the gateway, then another key for it', async () => {
    const created = await cli(['accounts', 'create', '--name', 'studio', '--credits', '40'], env);
    assert.equal(created.code, 0, created.stderr);
    const out = JSON.parse(created.stdout);
    assert.equal(out.account.credits, 40);
    const key2 = await cli(['keys', 'create', '--account', out.account.id, '--name', 'ci'], env);
    assert.equal(key2.code, 0, key2.stderr);
    const second = JSON.parse(key2.stdout);
    const gw = await new TestGateway(prefix).start();
    try {
      for (const key of [out.api_key, second.key]) {
        const me = await gw.request('GET', '/v1/account', { key });
        assert.equal(me.status, 200);
        assert.equal(me.body.id, out.account.id);
      }
    } finally {
      await gw.stop();
    }
  });

  it('fails fast with a clear message on bad configuration', async () => {
    const res = await cli(['serve'], { ...env, PORT: 'http', JSON_BODY_LIMIT: 'huge' });
    assert.equal(res.code, 2);
    assert.match(res.stderr, /invalid configuration/);
    assert.match(res.stderr, /PORT/);
    assert.match(res.stderr, /JSON_BODY_LIMIT/);
  });

  it('explains usage for unknown commands and missing flags', async () => {
    const unknown = await cli(['frobnicate'], env);
    assert.equal(unknown.code, 2);
    assert.match(unknown.stderr, /unknown command/);
    assert.match(unknown.stderr, /accounts create/);
    const missing = await cli(['keys', 'create'], env);
    assert.equal(missing.code, 2);
    assert.match(missing.stderr, /--account/);
    const nope = await cli(['keys', 'create', '--account', 'acct_01HZZZZZZZZZZZZZZZZZZZZZZZ'], env);
    assert.equal(nope.code, 2);
    assert.match(nope.stderr, /no account/);
  });

  it('npm start serves the gateway and stops cleanly on SIGTERM', async function () {
    this.timeout(30_000);
    // Its own process group: npm does not forward signals to the script, so the test signals the group.
    const child = spawn('npm', ['start', '--silent'], { env: { ...process.env, ...env, PORT: '0', LOG_LEVEL: 'info' }, stdio: ['ignore', 'pipe', 'inherit'], detached: true });
    let url = '';
    for await (const line of createInterface({ input: child.stdout! })) {
      if (line.startsWith('{') && JSON.parse(line).msg === 'gateway listening') {
        url = JSON.parse(line).url;
        break;
      }
    }
    assert.ok(url, 'the gateway announced its URL');
    const health = await fetch(`${url}/healthz`);
    assert.equal(health.status, 200);
    const lines = createInterface({ input: child.stdout! });
    process.kill(-child.pid!, 'SIGTERM');
    let shutdownLogged = false;
    for await (const line of lines) if (line.includes('"shutting down"')) shutdownLogged = true;
    assert.ok(shutdownLogged, 'the gateway shut down on SIGTERM');
    await assert.rejects(fetch(`${url}/healthz`), 'the port is closed');
  });

  it('runs as `npx switchyard` in the project', async function () {
    this.timeout(60_000);
    const { stdout } = await run('npx', ['switchyard', 'help'], { env: { ...process.env, ...env } });
    assert.match(stdout, /switchyard <command>/);
  });
});
