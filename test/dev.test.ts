import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { redisAnswers, startLocalRedis } from '../api/dev-redis.js';
import { REDIS_URL, cleanupPrefix, uniquePrefix } from './helpers/harness.js';

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as { port: number };
  await new Promise((r) => server.close(r));
  return port;
}

/** Runs `switchyard dev` until it has printed its banner; returns the banner and stops it. */
async function devBanner(env: Record<string, string>): Promise<string> {
  const child = spawn(process.execPath, ['api/bin/switchyard.mjs', 'dev'], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'inherit'] });
  let banner = '';
  for await (const line of createInterface({ input: child.stdout! })) {
    if (!line.startsWith('{')) banner += `${line}\n`;
    if (line.startsWith('API description:')) break;
  }
  child.kill('SIGTERM');
  await new Promise((r) => child.once('exit', r));
  return banner;
}

describe('npm run dev (issue 2)', () => {
  const dataDir = mkdtempSync(path.join(tmpdir(), 'switchyard-dev-'));
  const prefix = uniquePrefix('dev');
  after(async () => {
    rmSync(dataDir, { recursive: true, force: true });
    await cleanupPrefix(prefix);
  });

  it('prints a working API key and a curl line that submits a job, and keeps the key across restarts', async function () {
    this.timeout(30_000);
    const env = { PORT: '0', REDIS_URL, REDIS_PREFIX: prefix, DATA_DIR: dataDir, LOG_LEVEL: 'warn' };
    const banner = await devBanner(env);
    const key = /API key:\s+(sy_\S+)/.exec(banner)?.[1];
    assert.ok(key, banner);
    const curl = /curl -s -X POST (\S+)\/v1\/jobs -H "Authorization: Bearer (\S+)"/.exec(banner);
    assert.ok(curl, 'a curl line that submits a job');
    assert.equal(curl[2], key);
    assert.match(banner, /"kind":"inference:image:generate"/);
    assert.equal(/API key:\s+(sy_\S+)/.exec(await devBanner(env))?.[1], key, 'the same key after a restart');
  });

  it('starts a local redis-server with its data under DATA_DIR when none answers', async function () {
    this.timeout(20_000);
    const port = await freePort();
    const url = `redis://127.0.0.1:${port}`;
    assert.equal(await redisAnswers(url), false);
    const child = await startLocalRedis(dataDir, port);
    try {
      assert.equal(await redisAnswers(url), true);
    } finally {
      child.kill();
      await new Promise((r) => child.once('exit', r));
    }
    assert.equal(await redisAnswers(url), false, 'stopped with the gateway');
  });
});
