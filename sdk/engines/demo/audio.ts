import type { DemoFamily } from './job.js';
import { num } from './inputs.js';
import type { Rng } from './seed.js';
import { encodeWav, SAMPLE_RATE, toPcm16 } from './wav.js';

/** Demo audio stays short whatever duration is asked for, to keep jobs and uploads small. */
const MAX_SECONDS = 5;

const PENTATONIC = [0, 2, 4, 7, 9, 12];

/** A seeded pentatonic melody over a root-note bass: sine notes with a second harmonic and a decay. */
function music(seconds: number, rng: Rng): Float32Array {
  const out = new Float32Array(Math.round(seconds * SAMPLE_RATE));
  const root = 220 * 2 ** (rng.int(12) / 12);
  const beat = rng.range(0.18, 0.35);
  const beatSamples = Math.round(beat * SAMPLE_RATE);
  for (let start = 0, n = 0; start < out.length; start += beatSamples, n++) {
    const freq = root * 2 ** (rng.pick(PENTATONIC) / 12);
    const bass = n % 4 === 0 ? root / 2 : 0;
    const length = Math.min(out.length - start, beatSamples * (bass ? 4 : 1));
    for (let i = 0; i < length; i++) {
      const t = i / SAMPLE_RATE;
      const env = Math.min(1, t / 0.01) * Math.exp(-t * 6);
      const melody = i < beatSamples ? Math.sin(2 * Math.PI * freq * t) + 0.3 * Math.sin(4 * Math.PI * freq * t) : 0;
      out[start + i] += 0.3 * env * melody + (bass ? 0.25 * Math.exp(-t * 1.5) * Math.sin(2 * Math.PI * bass * t) : 0);
    }
  }
  return out;
}

/** A sound effect: low-passed noise plus a pitch sweep, both under one decaying envelope. */
function sfx(seconds: number, rng: Rng): Float32Array {
  const out = new Float32Array(Math.round(seconds * SAMPLE_RATE));
  const from = rng.range(200, 1500);
  const to = rng.range(60, 2000);
  const noiseMix = rng.range(0.2, 0.8);
  const smooth = rng.range(0.05, 0.6);
  let phase = 0;
  let noise = 0;
  for (let i = 0; i < out.length; i++) {
    const t = i / out.length;
    phase += (2 * Math.PI * (from + (to - from) * t)) / SAMPLE_RATE;
    noise += smooth * (rng.range(-1, 1) - noise); // one-pole low-pass
    const env = Math.min(1, i / 100) * (1 - t) ** 2;
    out[i] = 0.8 * env * (noiseMix * noise * 2 + (1 - noiseMix) * Math.sin(phase));
  }
  return out;
}

export const musicGenerate: DemoFamily = async ({ input, rng }) => {
  const seconds = num(input, 'duration_s', 3, 0.1, MAX_SECONDS);
  return { artifacts: [{ name: 'music.wav', contentType: 'audio/wav', data: encodeWav(toPcm16(music(seconds, rng))) }], extra: { duration_s: seconds } };
};

export const sfxGenerate: DemoFamily = async ({ input, rng }) => {
  const seconds = num(input, 'duration_s', 1, 0.1, MAX_SECONDS);
  return { artifacts: [{ name: 'sfx.wav', contentType: 'audio/wav', data: encodeWav(toPcm16(sfx(seconds, rng))) }], extra: { duration_s: seconds } };
};
