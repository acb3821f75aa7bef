import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { badInput, describeInput, readInputFile } from './files.js';
import { abortError, type DemoFamily } from './job.js';
import { str } from './inputs.js';
import { readWav, resampledWav, WavError, type WavInfo } from './wav.js';

const WORDS = ['the', 'demo', 'engine', 'heard', 'a', 'short', 'clip', 'about', 'switchyard', 'jobs', 'and', 'workers', 'running', 'on', 'remote', 'machines', 'today'];

/** pocketsphinx's acoustic model wants 16 kHz mono 16-bit; longer clips are cut, the demo only proves the path. */
export const RECOGNIZER_RATE = 16_000;
const MAX_RECOGNIZED_SECONDS = 120;
/** Tried in order when no command is configured: upstream's 5.x CLI, then Debian's 0.8 one. */
const RECOGNIZERS = ['pocketsphinx', 'pocketsphinx_continuous'];

type Heard = { text: string; recognizer: string } | { skipped: string };

function run(command: string, args: string[], signal: AbortSignal): Promise<{ stdout: string } | { missing: true } | { failed: string }> {
  return new Promise((resolve, reject) => {
    execFile(command, args, { encoding: 'utf8', maxBuffer: 16 * 1024 * 1024, signal, timeout: 300_000 }, (err, stdout, stderr) => {
      if (signal.aborted) return reject(abortError());
      if ((err as NodeJS.ErrnoException | null)?.code === 'ENOENT') return resolve({ missing: true });
      if (err) return resolve({ failed: `${err.message.split('\n')[0]} ${stderr.trim().split('\n').pop() ?? ''}`.trim() });
      resolve({ stdout });
    });
  });
}

/** The words in a recognizer's output: 5.x prints a JSON object a line (`t` is the text), 0.8 plain lines. */
function wordsOf(stdout: string): string {
  const parts = stdout.split('\n').map((line) => {
    try {
      const parsed = JSON.parse(line) as { t?: unknown };
      return typeof parsed?.t === 'string' ? parsed.t : '';
    } catch {
      return line;
    }
  });
  return parts.join(' ').replace(/\s+/g, ' ').trim();
}

/** Runs pocketsphinx on the audio, resampled to what its model wants; says why not when it cannot. */
async function recognize(command: string | null | undefined, wav: Buffer, info: WavInfo, language: string, signal: AbortSignal, log: (line: string) => void): Promise<Heard> {
  if (command === null) return { skipped: 'speech recognition is turned off' };
  if (!/^en(?:$|[-_])/i.test(language)) return { skipped: `pocketsphinx has only an English model, not ${language}` };
  const dir = await mkdtemp(path.join(os.tmpdir(), 'switchyard-asr-'));
  try {
    const file = path.join(dir, 'audio-16k.wav');
    await writeFile(file, resampledWav(wav, info, RECOGNIZER_RATE, MAX_RECOGNIZED_SECONDS));
    for (const candidate of command === undefined ? RECOGNIZERS : [command]) {
      const legacy = path.basename(candidate).includes('continuous');
      const out = await run(candidate, legacy ? ['-infile', file, '-logfn', os.devNull] : ['single', file], signal);
      if ('missing' in out) continue;
      if ('failed' in out) {
        log(`${candidate} failed: ${out.failed}`);
        return { skipped: `${path.basename(candidate)} failed` };
      }
      return { text: wordsOf(out.stdout), recognizer: path.basename(candidate) };
    }
    return { skipped: 'pocketsphinx is not installed' };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/**
 * inference:audio:transcribe: the input WAV's duration, and what pocketsphinx hears in it where
 * it is installed. Without a recognizer it writes a stable pseudo-transcript seeded by the input,
 * naming the clip and saying that no recognizer ran. Audio that is not WAV is `bad_input`.
 */
export const transcribe: DemoFamily = async ({ input, rng, ctx, pocketsphinx }) => {
  const audio = str(input, 'audio');
  const source = audio.startsWith('data:') ? 'an inline clip' : audio.split(/[?#]/)[0].split('/').pop() || 'the clip';
  const language = str(input, 'language', 'en');
  const read = await readInputFile(ctx, input, 'audio');
  let info: WavInfo | null = null;
  if (read) {
    try {
      info = readWav(read.data);
    } catch (err) {
      if (err instanceof WavError) throw badInput(`input audio: ${err.message}; the demo engine reads WAV only`, err);
      throw err;
    }
  }
  const heard: Heard = read && info ? await recognize(pocketsphinx, read.data, info, language, ctx.signal, (line) => ctx.log(line)) : { skipped: 'no audio file' };
  const duration = info ? Math.round(info.durationS * 1000) / 1000 : undefined;
  let text: string;
  if ('text' in heard) text = heard.text;
  else {
    const words = Array.from({ length: 8 + rng.int(8) }, () => rng.pick(WORDS));
    const about = duration === undefined ? source : `${source} (${duration} s of audio; no speech recognizer ran: ${heard.skipped})`;
    text = `Demo transcript of ${about}: ${words.join(' ')}.`;
  }
  const extra: Record<string, unknown> = { text, language };
  if (read && info) Object.assign(extra, { duration_s: duration, recognizer: 'text' in heard ? heard.recognizer : null, ...('skipped' in heard ? { note: `no speech recognizer ran: ${heard.skipped}` } : {}), input: describeInput('audio', read) });
  return {
    artifacts: [{ name: 'transcript.txt', contentType: 'text/plain; charset=utf-8', data: Buffer.from(`${text}\n`, 'utf8') }],
    extra,
  };
};
