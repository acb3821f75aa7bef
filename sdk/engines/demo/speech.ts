import { execFile } from 'node:child_process';
import type { EngineContext } from '../types.js';
import { describeInput, readInputFile } from './files.js';
import type { DemoFamily } from './job.js';
import { abortError } from './job.js';
import { str } from './inputs.js';
import type { Rng } from './seed.js';
import { encodeWav, readPcm16Mono, readWav, SAMPLE_RATE, toPcm16, WavError } from './wav.js';

/** Long texts are cut: the demo only has to prove the path, and espeak-ng time grows with length. */
const MAX_CHARS = 1000;

/**
 * Runs espeak-ng without a shell: the text is one argv entry after `--`, so neither shell
 * metacharacters nor a leading '-' can change what runs. Resolves null when espeak-ng is not
 * installed or fails, so the caller falls back to a tone.
 */
function espeak(command: string | null, text: string, signal: AbortSignal, log: (line: string) => void): Promise<Buffer | null> {
  if (command === null) return Promise.resolve(null);
  return new Promise((resolve, reject) => {
    execFile(command, ['--stdout', '--', text], { encoding: 'buffer', maxBuffer: 256 * 1024 * 1024, signal, timeout: 60_000 }, (err, stdout) => {
      if (signal.aborted) return reject(abortError());
      if (err) {
        log((err as NodeJS.ErrnoException).code === 'ENOENT' ? 'espeak-ng not on PATH, using a tone' : `espeak-ng failed (${err.message}), using a tone`);
        return resolve(null);
      }
      resolve(stdout);
    });
  });
}

/** The fallback: one short beep per word, pitch from the seed, so longer texts give longer files. */
function beeps(text: string, rng: Rng): Float32Array {
  const words = Math.max(1, Math.min(40, text.split(/\s+/).filter(Boolean).length));
  const word = Math.round(0.18 * SAMPLE_RATE);
  const gap = Math.round(0.07 * SAMPLE_RATE);
  const out = new Float32Array(words * (word + gap));
  for (let w = 0; w < words; w++) {
    const freq = rng.range(140, 260);
    for (let i = 0; i < word; i++) {
      const t = i / SAMPLE_RATE;
      out[w * (word + gap) + i] = 0.4 * Math.sin((Math.PI * i) / word) * Math.sin(2 * Math.PI * freq * t);
    }
  }
  return out;
}

/**
 * What the demo makes of a voice to clone (`reference_audio`): it clones nothing, but reports the
 * clip it got, its duration when it is a WAV (null otherwise: any audio may be a reference).
 */
async function referenceAudio(ctx: EngineContext, input: Record<string, unknown>): Promise<Record<string, unknown> | null> {
  const read = await readInputFile(ctx, input, 'reference_audio');
  if (!read) return null;
  let duration: number | null = null;
  try {
    duration = Math.round(readWav(read.data).durationS * 1000) / 1000;
  } catch (err) {
    if (!(err instanceof WavError)) throw err;
  }
  ctx.log(`reference audio: ${read.file.size} bytes${duration === null ? '' : `, ${duration} s`}; the demo engine does not clone voices`);
  return { ...describeInput('reference_audio', read), duration_s: duration };
}

/**
 * inference:audio:text-to-speech: real speech from espeak-ng when installed, else beeps.
 * espeak-ng's stdout WAV carries streaming placeholder sizes, so its PCM is re-wrapped with exact
 * ones. Its output is byte-stable for a given espeak-ng build, not across versions or hosts.
 */
export const textToSpeech: DemoFamily = async ({ input, rng, ctx, espeakNg }) => {
  const reference = await referenceAudio(ctx, input);
  const text = (str(input, 'text') || str(input, 'prompt') || 'hello').slice(0, MAX_CHARS);
  const spoken = await espeak(espeakNg, text, ctx.signal, (line) => ctx.log(line));
  const pcm = spoken && readPcm16Mono(spoken);
  if (spoken && !pcm) ctx.log('espeak-ng output was not 16-bit mono PCM, using a tone');
  const engine = pcm && pcm.samples.length > 0 ? 'espeak-ng' : 'tone';
  const data = pcm && engine === 'espeak-ng' ? encodeWav(pcm.samples, pcm.sampleRate) : encodeWav(toPcm16(beeps(text, rng)));
  return { artifacts: [{ name: 'speech.wav', contentType: 'audio/wav', data }], extra: { engine, ...(reference ? { reference_audio: reference } : {}) } };
};
