import assert from 'node:assert/strict';
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { chromium } from 'playwright-core';
import { PNG } from 'pngjs';
import { createLocalEngine } from '../sdk/engines/local/index.js';
import type { EngineContext } from '../sdk/engines/types.js';
import { REDIS_URL, TestGateway, cleanupPrefix, uniquePrefix, until } from './helpers/harness.js';
import { CHROMIUM, ESPEAK_NG, FFMPEG, FFPROBE, POCKETSPHINX, requireProgram } from './helpers/optional-program.js';

/**
 * `switchyard worker --engine local`: real espeak-ng, pocketsphinx and ffmpeg behind a real
 * gateway, checked by what hears, decodes and plays their files (pocketsphinx, ffprobe, Chromium).
 */

const TTS = 'inference:audio:text-to-speech';
const TRANSCRIBE = 'inference:audio:transcribe';
const VIDEO = 'inference:video:generate';
const TMP = mkdtempSync(path.join(os.tmpdir(), 'sy-local-engines-'));
after(() => rmSync(TMP, { recursive: true, force: true }));
const env = { ...process.env, REDIS_URL, LOG_LEVEL: 'warn', SWITCHYARD_WORKER_TOKEN: '' };

interface Worker {
  child: ChildProcess;
  exited: Promise<number | null>;
  stderr: () => string;
  stop(): Promise<number | null>;
}

/** `switchyard worker --engine local ...` until stopped; its stderr kept. */
function startWorker(gw: TestGateway, token: string, args: string[], childEnv: NodeJS.ProcessEnv = env): Worker {
  const child = spawn(process.execPath, ['api/bin/switchyard.mjs', 'worker', '--gateway', gw.url, '--token', token, '--engine', 'local', ...args], { env: childEnv, stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr!.on('data', (d) => (stderr += d));
  const exited = new Promise<number | null>((resolve) => child.on('exit', resolve));
  return {
    child,
    exited,
    stderr: () => stderr,
    stop: async () => {
      child.kill('SIGTERM');
      return exited;
    },
  };
}

async function workersOf(gw: TestGateway, key: string, kind: string): Promise<number> {
  const caps = (await gw.request('GET', '/v1/capabilities', { key })).body.kinds as Array<{ kind: string; workers: number }>;
  return caps.find((k) => k.kind === kind)!.workers;
}

/** Submits a job and waits for its end; fails the test unless it succeeded. */
async function runJob(gw: TestGateway, key: string, kind: string, input: Record<string, unknown>): Promise<{ run_id: string; output: Record<string, any> }> {
  const submitted = await gw.submit(key, { kind, input });
  assert.equal(submitted.status, 202, submitted.text);
  const job = await until(
    `the ${kind} job has ended`,
    async () => {
      const res = await gw.request('GET', `/v1/jobs/${submitted.body.run_id}`, { key });
      return ['succeeded', 'failed', 'canceled'].includes(res.body.status) && res.body;
    },
    60_000,
  );
  assert.equal(job.status, 'succeeded', JSON.stringify(job));
  return job;
}

const fetchBytes = async (url: string) => {
  const res = await fetch(url);
  return { type: res.headers.get('content-type'), data: Buffer.from(await res.arrayBuffer()) };
};

describe('the local engine (switchyard worker --engine local)', function () {
  // CLI processes load the TypeScript sources: seconds each on a loaded machine.
  this.timeout(180_000);
  const prefix = uniquePrefix('local-engines');
  let gw: TestGateway, key: string, token: string;

  before(async () => {
    gw = await new TestGateway(prefix).start();
    ({ key } = await gw.account(1000));
    token = await gw.workerToken();
  });
  after(async () => {
    await gw?.stop();
    await cleanupPrefix(prefix);
  });

  describe('speech, there and back', function () {
    before(function () {
      requireProgram(this, ESPEAK_NG);
      requireProgram(this, POCKETSPHINX);
    });

    it('espeak-ng speaks the text and pocketsphinx hears its words in the spoken WAV, with their times', async () => {
      const worker = startWorker(gw, token, ['--kinds', `${TTS},${TRANSCRIBE}`, '--slots', '2']);
      try {
        await until('the worker is registered', async () => (await workersOf(gw, key, TRANSCRIBE)) === 1, 60_000);
        const spoken = await runJob(gw, key, TTS, { text: 'yes please' });
        assert.equal(spoken.output.engine, 'espeak-ng');
        assert.ok(spoken.output.duration_s > 0.3, String(spoken.output.duration_s));
        assert.deepEqual(spoken.output.files.map((f: { name: string; content_type: string }) => [f.name, f.content_type]), [['speech.wav', 'audio/wav']]);
        const wav = await fetchBytes(spoken.output.urls[0]);
        assert.equal(wav.data.toString('latin1', 0, 4), 'RIFF');

        // The transcription fetches the speech as an artifact of the account's earlier run.
        const heard = await runJob(gw, key, TRANSCRIBE, { audio: spoken.output.urls[0] });
        assert.match(heard.output.text, /\byes\b.*\bplease\b/);
        assert.equal(heard.output.recognizer, 'pocketsphinx_continuous');
        assert.equal(heard.output.language, 'en');
        assert.equal(heard.output.duration_s, spoken.output.duration_s);
        assert.equal(heard.output.input.size, wav.data.length);
        const words = heard.output.words as Array<{ word: string; start_s: number; end_s: number }>;
        assert.deepEqual(words.map((w) => w.word).join(' '), heard.output.text);
        for (const [i, w] of words.entries()) {
          assert.ok(w.start_s < w.end_s && w.end_s <= heard.output.duration_s, JSON.stringify(w));
          if (i > 0) assert.ok(words[i - 1].end_s <= w.start_s, 'in order');
        }
        assert.equal((await fetchBytes(heard.output.urls[0])).data.toString(), `${heard.output.text}\n`);
      } finally {
        assert.equal(await worker.stop(), 0, worker.stderr());
      }
      assert.match(worker.stderr(), /local engine serving inference:audio:text-to-speech with \S*espeak-ng, inference:audio:transcribe with \S*pocketsphinx_continuous/);
    });
  });

  describe('video', function () {
    let ffprobe: string;
    let browserPath: string;
    before(function () {
      requireProgram(this, FFMPEG);
      ffprobe = requireProgram(this, FFPROBE);
      browserPath = requireProgram(this, CHROMIUM);
    });

    it('ffmpeg makes an H.264 MP4 from a prompt, and a zoom into an input image, that ffprobe decodes and Chromium plays', async () => {
      const worker = startWorker(gw, token, ['--kinds', VIDEO]);
      const browser = await chromium.launch({ executablePath: browserPath, args: ['--no-sandbox'] });
      try {
        await until('the worker is registered', async () => (await workersOf(gw, key, VIDEO)) === 1, 60_000);
        const image = new PNG({ width: 64, height: 48 });
        for (let i = 0; i < image.data.length; i += 4) image.data.set([(i / 4) % 64 * 4, 120, 200, 255], i);
        const dataUri = `data:image/png;base64,${PNG.sync.write(image).toString('base64')}`;
        const cases: Array<[Record<string, unknown>, number]> = [
          [{ prompt: 'a red fox: 100% "sure"', duration_s: 2, fps: 12 }, 24],
          [{ image: dataUri, prompt: 'zoom in', duration_s: 1, fps: 10 }, 10],
        ];
        for (const [input, frames] of cases) {
          const job = await runJob(gw, key, VIDEO, input);
          assert.deepEqual([job.output.width, job.output.height, job.output.fps, job.output.frames], [640, 360, input.fps, frames]);
          assert.equal(job.output.files[0].content_type, 'video/mp4');
          if (input.image) assert.equal(job.output.input.field, 'image');
          const { data } = await fetchBytes(job.output.urls[0]);
          const file = path.join(TMP, `${job.run_id}.mp4`);
          writeFileSync(file, data);
          const probe = JSON.parse(
            (await promisify(execFile)(ffprobe, ['-v', 'error', '-select_streams', 'v:0', '-count_frames', '-show_entries', 'stream=codec_name,pix_fmt,nb_read_frames,width,height:format=duration', '-of', 'json', file])).stdout,
          );
          const stream = probe.streams[0];
          assert.deepEqual([stream.codec_name, stream.pix_fmt, stream.width, stream.height, Number(stream.nb_read_frames)], ['h264', 'yuv420p', 640, 360, frames]);
          assert.ok(Math.abs(Number(probe.format.duration) - Number(input.duration_s)) < 0.1, probe.format.duration);
          // +faststart: the index (moov) comes before the frames (mdat), so a browser can start at once.
          assert.ok(data.indexOf('moov') < data.indexOf('mdat'), 'moov before mdat');

          const page = await browser.newPage();
          try {
            await page.setContent(`<video id="v" muted preload="auto" src="${job.output.urls[0]}"></video>`);
            // Played as far as its first frame (HAVE_CURRENT_DATA), or refused with a media error.
            await page.waitForFunction("document.getElementById('v').readyState >= 2 || document.getElementById('v').error !== null");
            const state = await page.locator('#v').evaluate((v: any) => ({ ready: v.readyState, error: v.error?.code ?? null, width: v.videoWidth }));
            assert.equal(state.error, null, 'Chromium decodes it');
            assert.ok(state.ready >= 2, `readyState ${state.ready}`);
            assert.equal(state.width, 640);
          } finally {
            await page.close();
          }
        }
      } finally {
        await browser.close();
        assert.equal(await worker.stop(), 0, worker.stderr());
      }
    });
  });

  describe('on a machine without the programs', () => {
    /** A PATH with only espeak-ng on it (the CLI itself runs from process.execPath). */
    let bare: string;
    before(function () {
      const espeak = requireProgram(this, ESPEAK_NG);
      bare = mkdtempSync(path.join(os.tmpdir(), 'sy-local-bare-'));
      symlinkSync(espeak, path.join(bare, 'espeak-ng'));
    });
    after(() => bare && rmSync(bare, { recursive: true, force: true }));

    it('serves the kinds whose program is installed and says what to install for the others', async () => {
      const worker = startWorker(gw, token, [], { ...env, PATH: bare });
      try {
        await until('the worker is registered', async () => (await workersOf(gw, key, TTS)) === 1, 60_000);
        assert.equal(await workersOf(gw, key, VIDEO), 0);
        assert.equal(await workersOf(gw, key, TRANSCRIBE), 0);
      } finally {
        assert.equal(await worker.stop(), 0, worker.stderr());
      }
      assert.match(worker.stderr(), /local engine serving inference:audio:text-to-speech with \S+; not inference:audio:transcribe needs pocketsphinx_continuous \(apt-get install -y pocketsphinx pocketsphinx-en-us\); inference:video:generate needs ffmpeg \(apt-get install -y ffmpeg\)/);
    });

    it('exits 1 when --kinds asks for a kind whose program is missing', async () => {
      const worker = startWorker(gw, token, ['--kinds', VIDEO], { ...env, PATH: bare });
      const code = await worker.exited;
      assert.equal(code, 1, worker.stderr());
      assert.match(worker.stderr(), /--engine local cannot serve what --kinds asks: inference:video:generate needs ffmpeg \(apt-get install -y ffmpeg\)/);
    });
  });
});

describe('the local engine refuses what it cannot use, for good', function () {
  this.timeout(60_000);
  const engine = createLocalEngine();
  /** A context whose input files are `files` (bytes written to the temp dir). */
  const context = (files: Record<string, Buffer> = {}): EngineContext => ({
    signal: new AbortController().signal,
    progress: () => {},
    log: () => {},
    output: () => {},
    inputFile: async (field) => {
      const file = path.join(TMP, `refusal-${field}-${Object.keys(files).length}-${Math.random().toString(36).slice(2)}`);
      writeFileSync(file, files[field]);
      return { path: file, size: files[field].length, contentType: 'application/octet-stream', sha256: '0'.repeat(64) };
    },
  });
  const refusal = async (kind: string, input: Record<string, unknown>, ctx: EngineContext) => {
    const err = await engine.handler(kind, input, ctx).then(
      () => assert.fail('the job succeeded'),
      (e: { code: string; retryable: boolean; message: string }) => e,
    );
    assert.deepEqual([err.code, err.retryable], ['bad_input', false], err.message);
    return err.message;
  };

  describe('text-to-speech', function () {
    before(function () {
      requireProgram(this, ESPEAK_NG);
    });
    it('a voice espeak-ng does not have, or that is not a voice name', async () => {
      assert.match(await refusal(TTS, { text: 'hi', voice: 'xx-nosuch' }, context()), /voice does not exist/);
      assert.match(await refusal(TTS, { text: 'hi', voice: '--help' }, context()), /not an espeak-ng voice name/);
    });
  });

  describe('transcription', function () {
    before(function () {
      requireProgram(this, POCKETSPHINX);
    });
    it('audio that is not WAV, and a language other than English', async () => {
      assert.match(await refusal(TRANSCRIBE, { audio: 'file_x' }, context({ audio: Buffer.from('ID3 not a wav at all') })), /reads WAV only/);
      assert.match(await refusal(TRANSCRIBE, { audio: 'file_x', language: 'de' }, context({ audio: Buffer.alloc(10) })), /only an English model, not de/);
    });
  });

  describe('video', function () {
    before(function () {
      requireProgram(this, FFMPEG);
    });
    it('an image ffmpeg cannot read', async () => {
      assert.match(await refusal(VIDEO, { image: 'file_x', duration_s: 0.5 }, context({ image: Buffer.from('not an image') })), /refused the input/);
    });
  });
});
