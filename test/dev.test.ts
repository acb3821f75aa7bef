import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { redisAnswers, startLocalRedis } from '../api/main/dev/dev-redis.js';
import { REDIS_URL, cleanupPrefix, uniquePrefix, until } from './helpers/harness.js';
import { ESPEAK_NG, FFMPEG, POCKETSPHINX, findProgram } from './helpers/optional-program.js';
import { freePort } from './helpers/ports.js';


/** Runs `switchyard dev` until it has printed its banner, runs `whileUp`, then stops it. */
async function devBanner(env: Record<string, string>, whileUp?: (banner: string) => Promise<void>): Promise<string> {
  const child = spawn(process.execPath, ['api/bin/switchyard.mjs', 'dev'], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'inherit'] });
  let banner = '';
  try {
    for await (const line of createInterface({ input: child.stdout! })) {
      if (!line.startsWith('{')) banner += `${line}\n`;
      if (line.startsWith('API description:')) break;
    }
    await whileUp?.(banner);
  } finally {
    child.kill('SIGTERM');
    await new Promise((r) => child.once('exit', r));
  }
  return banner;
}

describe('npm run dev', () => {
  const dataDir = mkdtempSync(path.join(tmpdir(), 'switchyard-dev-'));
  const prefix = uniquePrefix('dev');
  after(async () => {
    rmSync(dataDir, { recursive: true, force: true });
    await cleanupPrefix(prefix);
  });

  it('prints a working API key and a curl line whose job finishes on the demo fleet with a downloadable artifact', async function () {
    this.timeout(60_000);
    const env = { PORT: '0', REDIS_URL, REDIS_PREFIX: prefix, DATA_DIR: dataDir, LOG_LEVEL: 'warn', DEMO_DELAY_MS: '0' };
    const banner = await devBanner(env, async (text) => {
      const url = /running at (\S+)/.exec(text)![1];
      const key = /API key:\s+(sy_\S+)/.exec(text)![1];
      const body = /-d '(.+)'/.exec(text)![1];
      const headers = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
      const submitted = (await (await fetch(`${url}/v1/jobs`, { method: 'POST', headers, body })).json()) as { run_id: string };
      let job: { status: string; output: { urls: string[] } | null } = { status: 'queued', output: null };
      for (let i = 0; i < 200 && job.status !== 'succeeded'; i++) {
        await new Promise((r) => setTimeout(r, 50));
        job = (await (await fetch(`${url}/v1/jobs/${submitted.run_id}`, { headers })).json()) as typeof job;
      }
      assert.equal(job.status, 'succeeded');
      const artifact = await fetch(job.output!.urls[0]);
      assert.equal(artifact.headers.get('content-type'), 'image/png');
      assert.deepEqual([...Buffer.from(await artifact.arrayBuffer()).subarray(0, 4)], [0x89, 0x50, 0x4e, 0x47], 'a PNG, fetched with no header');
    });
    assert.match(banner, /dev worker serves all 11 kinds/);
    const key = /API key:\s+(sy_\S+)/.exec(banner)?.[1];
    assert.ok(key, banner);
    const curl = /curl -s -X POST (\S+)\/v1\/jobs -H "Authorization: Bearer (\S+)"/.exec(banner);
    assert.ok(curl, 'a curl line that submits a job');
    assert.equal(curl[2], key);
    assert.match(banner, /"kind":"inference:image:generate"/);
    assert.equal(/API key:\s+(sy_\S+)/.exec(await devBanner(env))?.[1], key, 'the same key after a restart');
  });

  it('prints a one-time console sign-in link that signs in to the dev account, once', async function () {
    this.timeout(60_000);
    const env = { PORT: '0', REDIS_URL, REDIS_PREFIX: prefix, DATA_DIR: dataDir, LOG_LEVEL: 'warn', DEMO_DELAY_MS: '0' };
    await devBanner(env, async (text) => {
      const url = /running at (\S+)/.exec(text)![1];
      const link = /Console:\s+(\S+)/.exec(text)?.[1];
      assert.ok(link, text);
      const { origin, pathname, hash } = new URL(link);
      assert.equal(`${origin}${pathname}`, `${url}/sign-in`);
      const page = await fetch(link);
      assert.equal(page.status, 200);
      assert.match(await page.text(), /<div id="app">/);
      const redeem = () => fetch(`${url}/v1/console/sign-in`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ code: new URLSearchParams(hash.slice(1)).get('code') }) });
      const first = await redeem();
      assert.equal(first.status, 201);
      const { api_key } = (await first.json()) as { api_key: string };
      const devKey = /API key:\s+(sy_\S+)/.exec(text)![1];
      const account = async (key: string) => ((await (await fetch(`${url}/v1/account`, { headers: { authorization: `Bearer ${key}` } })).json()) as { id: string }).id;
      assert.equal(await account(api_key), await account(devKey), "the link's key opens the dev account");
      assert.equal((await redeem()).status, 401, 'the link works once');
    });
  });

  it("shows the private flow: its private demo worker's run passes the printed `switchyard verify` line", async function () {
    this.timeout(60_000);
    const env = { PORT: '0', REDIS_URL, REDIS_PREFIX: prefix, DATA_DIR: dataDir, LOG_LEVEL: 'warn', DEMO_DELAY_MS: '0' };
    await devBanner(env, async (text) => {
      assert.match(text, /TEST evidence/);
      const url = /running at (\S+)/.exec(text)![1];
      const key = /API key:\s+(sy_\S+)/.exec(text)![1];
      const body = /-d '(.+"confidentiality":"private".+)'/.exec(text)![1];
      const headers = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
      const { run_id: runId } = (await (await fetch(`${url}/v1/jobs`, { method: 'POST', headers, body })).json()) as { run_id: string };
      let status = 'queued';
      for (let i = 0; i < 200 && status !== 'succeeded'; i++) {
        await new Promise((r) => setTimeout(r, 50));
        status = ((await (await fetch(`${url}/v1/jobs/${runId}`, { headers })).json()) as { status: string }).status;
      }
      assert.equal(status, 'succeeded');
      const args = /npx switchyard (verify .+)$/m.exec(text)![1].replace('<run_id>', runId).split(' ');
      const verified = spawn(process.execPath, ['api/bin/switchyard.mjs', ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
      let out = '';
      verified.stdout!.on('data', (d) => (out += d));
      verified.stderr!.on('data', (d) => (out += d));
      assert.equal(await new Promise((r) => verified.once('exit', r)), 0, out);
      assert.match(out, /^verified: /);
    });
  });

  it('serves speech, transcription and video with the real programs of this machine where they are installed, and says so', async function () {
    this.timeout(60_000);
    const env = { PORT: '0', REDIS_URL, REDIS_PREFIX: prefix, DATA_DIR: dataDir, LOG_LEVEL: 'warn', DEMO_DELAY_MS: '0' };
    const local = ([['inference:audio:text-to-speech', ESPEAK_NG], ['inference:audio:transcribe', POCKETSPHINX], ['inference:video:generate', FFMPEG]] as const).filter(([, p]) => findProgram(p));
    await devBanner(env, async (banner) => {
      for (const [kind, program] of local) assert.match(banner, new RegExp(`${kind} with ${program.name}`));
      if (local.length) assert.match(banner, new RegExp(`${local.length} with real programs of this machine[\\s\\S]*the other ${11 - local.length} with the demo engine`));
      if (!local.some(([kind]) => kind === 'inference:video:generate')) return;
      // The local engine's video is an MP4; the demo engine's an AVI.
      const url = /running at (\S+)/.exec(banner)![1];
      const headers = { authorization: `Bearer ${/API key:\s+(sy_\S+)/.exec(banner)![1]}`, 'content-type': 'application/json' };
      const body = JSON.stringify({ kind: 'inference:video:generate', input: { prompt: 'a lighthouse', duration_s: 0.5 } });
      const { run_id: runId } = (await (await fetch(`${url}/v1/jobs`, { method: 'POST', headers, body })).json()) as { run_id: string };
      const job = await until('the video job has ended', async () => {
        const j = (await (await fetch(`${url}/v1/jobs/${runId}`, { headers })).json()) as { status: string; output: { files: Array<{ name: string }> } };
        return ['succeeded', 'failed'].includes(j.status) && j;
      }, 30_000);
      assert.equal(job.status, 'succeeded', JSON.stringify(job));
      assert.equal(job.output.files[0].name, 'video.mp4');
    });
    const bare = mkdtempSync(path.join(tmpdir(), 'switchyard-dev-bare-'));
    try {
      const banner = await devBanner({ ...env, PATH: bare });
      assert.match(banner, /dev worker serves all 11 kinds \(trusted tier, 4 slots\) with the demo engine/);
      assert.match(banner, /For real inference:audio:text-to-speech, inference:audio:transcribe, inference:video:generate on the local engine: apt-get install -y espeak-ng && apt-get install -y pocketsphinx pocketsphinx-en-us && apt-get install -y ffmpeg/);
    } finally {
      rmSync(bare, { recursive: true, force: true });
    }
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
