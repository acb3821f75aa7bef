import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { REDIS_URL, TestGateway, cleanupPrefix, errorCode, uniquePrefix, until } from './helpers/harness.js';
import { DevProcess } from './helpers/dev-process.js';

/**
 * The development loop around `npm run dev`: the queue board and the `switchyard` command work
 * with exactly what the banner prints, and `--allow-local` lets a tool under construction on
 * this machine (plain http, loopback) be called, which serve never allows.
 */

/** A plain-http receiver on 127.0.0.1 that records each request and answers JSON. */
async function localReceiver(): Promise<{ server: http.Server; port: number; seen: { method: string; url: string; body: string }[] }> {
  const seen: { method: string; url: string; body: string }[] = [];
  const server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', () => {
      seen.push({ method: req.method ?? '', url: req.url ?? '', body });
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ forecast: 'sunny' }));
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { server, port: (server.address() as AddressInfo).port, seen };
}

const weatherTool = (url: string) => ({
  name: 'weather',
  description: 'Looks up the weather of a city',
  kind: 'http',
  method: 'POST',
  url,
  inputSchema: { type: 'object', properties: { city: { type: 'string', minLength: 1 } }, required: ['city'], additionalProperties: false },
});

async function call(url: string, init: { method?: string; key?: string; body?: unknown; headers?: Record<string, string> } = {}) {
  const res = await fetch(url, {
    method: init.method ?? 'GET',
    headers: { ...(init.key ? { authorization: `Bearer ${init.key}` } : {}), ...(init.body ? { 'content-type': 'application/json' } : {}), ...init.headers },
    body: init.body === undefined ? undefined : JSON.stringify(init.body),
  });
  const text = await res.text();
  let body: any = null;
  try {
    body = JSON.parse(text);
  } catch {
    // HTML or empty.
  }
  return { status: res.status, headers: res.headers, text, body };
}

describe('npm run dev: the development loop', function () {
  this.timeout(120_000);
  const dataDir = mkdtempSync(path.join(tmpdir(), 'switchyard-devloop-'));
  const prefix = uniquePrefix('devloop');
  let receiver: Awaited<ReturnType<typeof localReceiver>>;
  let dev: DevProcess;

  before(async () => {
    receiver = await localReceiver();
    dev = await new DevProcess(['--allow-local', String(receiver.port)], {
      PORT: '0',
      REDIS_URL,
      REDIS_PREFIX: prefix,
      DATA_DIR: dataDir,
      LOG_LEVEL: 'warn',
      DEMO_DELAY_MS: '0',
    }).start();
  });

  after(async () => {
    await dev?.stop();
    receiver?.server.close();
    await cleanupPrefix(prefix);
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('prints the queue board URL with a dev admin token that opens it, and only with that token', async () => {
    const board = dev.match(/Queue board[^:]*: (\S+)/);
    const password = dev.match(/user admin with password (\S+)/);
    assert.equal(board, `${dev.url}/admin/queues`);
    const basic = (p: string) => ({ authorization: `Basic ${Buffer.from(`admin:${p}`).toString('base64')}` });
    const page = await call(board, { headers: basic(password) });
    assert.equal(page.status, 200, page.text);
    assert.match(page.headers.get('content-type') ?? '', /^text\/html/);
    assert.match(page.text, /<div id="root">/);
    assert.equal((await call(board)).status, 401, 'the board is not open to anyone');
    assert.equal((await call(board, { headers: basic(`${password}x`) })).status, 401);
    // The same token is the operator API's: dev turns on both.
    assert.equal((await call(`${dev.url}/v1/admin/operators`, { key: password })).status, 200);
  });

  it('prints an export line with which the printed `npx switchyard run` line runs a job to the end on the demo worker', async () => {
    const exportLine = dev.match(/^\s*(export SWITCHYARD_\S+=.*)$/m);
    assert.match(exportLine, /SWITCHYARD_API_KEY=sy_\S+/);
    const runLine = dev.match(/^\s*(npx switchyard run .+)$/m);
    // Exactly as a developer pastes them into a fresh shell, with nothing else set.
    const { SWITCHYARD_URL: _u, SWITCHYARD_API_KEY: _k, ...env } = process.env;
    const shell = spawn('sh', ['-c', `${exportLine}\n${runLine}`], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    shell.stdout!.on('data', (d) => (out += d));
    shell.stderr!.on('data', (d) => (err += d));
    const [code] = await once(shell, 'exit');
    assert.equal(code, 0, `${runLine}\n${err}`);
    const artifact = out.trim().split('\n').at(-1)!;
    assert.ok(artifact.startsWith(`${dev.url}/`), `the artifact URL is printed: ${out}`);
    const png = await fetch(artifact);
    assert.equal(png.status, 200);
    assert.equal(png.headers.get('content-type'), 'image/png');
  });

  it('warns loudly that --allow-local is unsafe outside development', () => {
    assert.match(dev.banner, /UNSAFE OUTSIDE DEVELOPMENT.*plain http.*loopback.*port \d+/);
    assert.match(dev.stderr, /UNSAFE OUTSIDE DEVELOPMENT/);
  });

  it('with --allow-local PORT, registers a plain-http tool on 127.0.0.1:PORT and a bot calls it', async () => {
    const key = dev.match(/API key:\s+(sy_\S+)/);
    const tool = await call(`${dev.url}/v1/tools/definitions`, { method: 'POST', key, body: weatherTool(`http://127.0.0.1:${receiver.port}/tools/weather`) });
    assert.equal(tool.status, 201, tool.text);
    const origin = 'http://localhost:3000';
    const bot = await call(`${dev.url}/v1/bots`, { method: 'POST', key, body: { name: 'forecaster', model: 'demo-llm', systemPrompt: 'Be brief.', tools: [tool.body.tool_id], allowedOrigins: [origin] } });
    assert.equal(bot.status, 201, bot.text);
    const before = receiver.seen.length;
    const reply = await call(`${bot.body.invokeUrl}?token=${encodeURIComponent(bot.body.embedToken)}`, { method: 'POST', body: { message: 'what is the weather in Paris?' }, headers: { origin } });
    assert.equal(reply.status, 200, reply.text);
    assert.equal(receiver.seen.length, before + 1, 'the local tool was called once');
    assert.equal(receiver.seen[before].url, '/tools/weather');
    const [step] = reply.body.steps;
    assert.deepEqual({ ok: step.ok, status: step.status, output: step.output }, { ok: true, status: 200, output: { forecast: 'sunny' } });
  });

  it("with --allow-local PORT, delivers a job's webhook to a plain-http receiver on 127.0.0.1:PORT", async () => {
    const key = dev.match(/API key:\s+(sy_\S+)/);
    const webhook = `http://127.0.0.1:${receiver.port}/hooks/job`;
    const job = await call(`${dev.url}/v1/jobs`, { method: 'POST', key, body: { kind: 'inference:image:generate', input: { prompt: 'a kite' }, webhook } });
    assert.equal(job.status, 202, job.text);
    const delivery = await until('the webhook delivery', async () => receiver.seen.find((r) => r.url === '/hooks/job' && r.body.includes(job.body.run_id)), 30_000);
    assert.equal(delivery.method, 'POST');
    assert.equal(JSON.parse(delivery.body).type, 'job.completed');
  });

  it('with --allow-local PORT, still refuses plain http and loopback on any other port', async () => {
    const key = dev.match(/API key:\s+(sy_\S+)/);
    const other = receiver.port === 65535 ? receiver.port - 1 : receiver.port + 1;
    const res = await call(`${dev.url}/v1/tools/definitions`, { method: 'POST', key, body: { ...weatherTool(`http://127.0.0.1:${other}/tools/weather`), name: 'elsewhere' } });
    assert.equal(res.status, 400, res.text);
    assert.equal(res.body.error.code, 'invalid_url');
  });
});

describe('serve and the dev-only local outbound policy', function () {
  this.timeout(30_000);

  it('serve with its defaults refuses the same plain-http loopback tool and job webhook with 400', async () => {
    const prefix = uniquePrefix('devloop-serve');
    const receiver = await localReceiver();
    const gw = await new TestGateway(prefix).start();
    try {
      const { key } = await gw.account(100);
      const res = await gw.request('POST', '/v1/tools/definitions', { key, body: weatherTool(`http://127.0.0.1:${receiver.port}/tools/weather`) });
      assert.equal(res.status, 400, res.text);
      assert.equal(errorCode(res), 'invalid_url');
      const job = await gw.submit(key, { kind: 'inference:image:generate', input: { prompt: 'a kite' }, webhook: `http://127.0.0.1:${receiver.port}/hooks/job` });
      assert.equal(job.status, 400, job.text);
      assert.equal(errorCode(job), 'invalid_url');
      assert.equal(receiver.seen.length, 0);
    } finally {
      await gw.stop();
      receiver.server.close();
      await cleanupPrefix(prefix);
    }
  });

  it('serve refuses to start with DEV_ALLOW_LOCAL_PORTS set, naming it', async () => {
    const prefix = uniquePrefix('devloop-refuse');
    const child = spawn(process.execPath, ['api/bin/switchyard.mjs', 'serve'], {
      env: { ...process.env, PORT: '0', HOST: '127.0.0.1', REDIS_URL, REDIS_PREFIX: prefix, LOG_LEVEL: 'info', DEV_ALLOW_LOCAL_PORTS: '8080' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let err = '';
    child.stderr!.on('data', (d) => (err += d));
    const exited = once(child, 'exit').then(([code]) => code as number | null);
    // A serve that starts anyway is stopped at once, so the test fails instead of hanging.
    const listening = new Promise<'listening'>((resolve) => {
      child.stdout!.on('data', (d) => {
        if (String(d).includes('gateway listening')) resolve('listening');
      });
    });
    try {
      const first = await Promise.race([exited, listening]);
      assert.notEqual(first, 'listening', 'serve started with DEV_ALLOW_LOCAL_PORTS');
      assert.equal(first, 2, err);
      assert.match(err, /DEV_ALLOW_LOCAL_PORTS is for `npm run dev` only/);
    } finally {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGKILL');
        await exited;
      }
      await cleanupPrefix(prefix);
    }
  });

  it('--allow-local belongs to dev: another command refuses it as a usage error', async () => {
    const child = spawn(process.execPath, ['api/bin/switchyard.mjs', 'serve', '--allow-local', '8080'], { env: { ...process.env, PORT: '0' }, stdio: ['ignore', 'pipe', 'pipe'] });
    let err = '';
    child.stderr!.on('data', (d) => (err += d));
    const [code] = await once(child, 'exit');
    assert.equal(code, 2, err);
    assert.match(err, /--allow-local is for dev only/);
  });
});
