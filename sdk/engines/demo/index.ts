import { withUsage } from '../usage.js';
import type { Engine } from '../types.js';
import { musicGenerate, sfxGenerate } from './audio.js';
import { image } from './image.js';
import { type DemoFamily, sleep, throwIfAborted } from './job.js';
import { llm } from './llm.js';
import { mesh } from './mesh.js';
import { isRankedDemoJob, runRankedDemo } from './ranked-serving.js';
import { rig } from './rig.js';
import { Rng, seedFor } from './seed.js';
import { textToSpeech } from './speech.js';
import { texture } from './texture.js';
import { transcribe } from './transcribe.js';
import { video } from './video.js';

export { DEMO_RANKED_MODELS } from './ranked-serving.js';

export interface DemoEngineOptions {
  /** Total simulated work time, spread over the progress steps (the worker's --demo-delay-ms). */
  delayMs?: number;
  /** espeak-ng command for text-to-speech; null always uses the synthesized tone. */
  espeakNg?: string | null;
  /**
   * Speech recognizer for transcription: `pocketsphinx` (5.x, `pocketsphinx single`) or
   * `pocketsphinx_continuous` (0.8, Debian's). Undefined looks for either on PATH; null never
   * runs one, and transcripts say so.
   */
  pocketsphinx?: string | null;
}

/** The llm model the demo engine advertises by default (docs/models.md): jobs and chat completions name it. */
export const DEMO_LLM_MODEL = Object.freeze({ id: 'demo-llm', description: 'The demo engine: made-up text, streamed like a model would' });

/** One family per kind; the two mesh kinds share a writer. */
export const DEMO_FAMILIES: Readonly<Record<string, DemoFamily>> = {
  'inference:image:generate': image,
  'inference:3d:image-to-mesh': mesh,
  'inference:3d:text-to-mesh': mesh,
  'inference:video:generate': video,
  'inference:texture:generate': texture,
  'inference:rig': rig,
  'inference:llm:text-generate': llm,
  'inference:audio:music-generate': musicGenerate,
  'inference:audio:sfx-generate': sfxGenerate,
  'inference:audio:text-to-speech': textToSpeech,
  'inference:audio:transcribe': transcribe,
};

const STEPS: Array<[number, string]> = [
  [0.25, 'loading demo model'],
  [0.5, 'sampling'],
  [0.75, 'encoding'],
];

/**
 * The demo engine: small, valid, deterministic files for every kind, so the whole gateway can be
 * exercised without a GPU. It also serves the demo ranked models, whole or by rank
 * (ranked-serving.ts). The delay is spent before generating, in quarter steps, each of which
 * can be interrupted by ctx.signal; the LLM streams during the last quarter, the others sleep it.
 */
export function createDemoEngine({ delayMs = 1000, espeakNg = 'espeak-ng', pocketsphinx }: DemoEngineOptions = {}): Engine {
  const step = Math.max(0, delayMs) / 4;
  return async (kind, input, ctx) => {
    const family = DEMO_FAMILIES[kind];
    if (!family) throw new Error(`the demo engine has no kind ${JSON.stringify(kind)}`);
    // The ranked models, whole or one rank of a pipeline, do real (small) work: no simulated delay.
    if (isRankedDemoJob(kind, input, ctx)) return withUsage(kind, await runRankedDemo(kind, input, ctx));
    throwIfAborted(ctx.signal);
    for (const [p, message] of STEPS) {
      await sleep(step, ctx.signal);
      ctx.progress(p, message);
    }
    const seed = seedFor(kind, input);
    const result = await family({ kind, input, ctx, rng: new Rng(seed), seed, delayMs, espeakNg, pocketsphinx });
    if (family !== llm) await sleep(step, ctx.signal);
    throwIfAborted(ctx.signal);
    ctx.progress(1, 'done');
    return withUsage(kind, result);
  };
}
