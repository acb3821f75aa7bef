import { createDemoEngine } from '../../sdk/engines/demo/index.js';
import { encodePng } from '../../sdk/engines/demo/png.js';
import { encodeWav } from '../../sdk/engines/demo/wav.js';

/** Real files of each type a job input takes, small enough for data: URIs. */

/** A PNG of `side`² RGB pixels, distinct per seed. */
export const samplePng = (side = 8, seed = 1): Buffer => encodePng(side, side, 3, Uint8Array.from({ length: side * side * 3 }, (_, i) => (i * seed) % 256));

/** A short mono WAV (a tone). */
export const sampleWav = (): Buffer => encodeWav(Int16Array.from({ length: 2000 }, (_, i) => Math.round(8000 * Math.sin(i / 5))));

/** A glTF binary mesh, as the demo engine makes one from a prompt. */
export async function sampleGlb(): Promise<Buffer> {
  const ctx = { signal: new AbortController().signal, progress: () => {}, log: () => {}, output: () => {}, inputFile: () => Promise.reject(new Error('no input files')) };
  const { artifacts } = await createDemoEngine({ delayMs: 0 })('inference:3d:text-to-mesh', { prompt: 'a cube' }, ctx);
  return artifacts[0].data;
}

export const dataUri = (type: string, bytes: Buffer): string => `data:${type};base64,${bytes.toString('base64')}`;
