import { DEFAULT_LIMITS, runCommandJob, type CommandLimits, type CommandRecipe } from '../command/index.js';
import type { Engine } from '../types.js';
import { ESPEAK_NG, FFMPEG, findOnPath, POCKETSPHINX, type LocalProgram } from './programs.js';
import { speechRecipe, TTS_KIND } from './speech.js';
import { TRANSCRIBE_KIND, transcribeRecipe } from './transcribe.js';
import { VIDEO_KIND, videoRecipe } from './video.js';

export { ESPEAK_NG, FFMPEG, POCKETSPHINX, findOnPath, type LocalProgram } from './programs.js';
export { TRANSCRIBE_KIND, TTS_KIND, VIDEO_KIND };

/** Each kind of the local engine, the program it runs, its recipe and the input fields the recipe reads as files. */
const PRESETS: Array<{ kind: string; program: LocalProgram; option: 'espeakNg' | 'pocketsphinx' | 'ffmpeg'; recipe: (bin: string) => CommandRecipe; files: string[] }> = [
  { kind: TTS_KIND, program: ESPEAK_NG, option: 'espeakNg', recipe: speechRecipe, files: [] },
  { kind: TRANSCRIBE_KIND, program: POCKETSPHINX, option: 'pocketsphinx', recipe: transcribeRecipe, files: ['audio'] },
  { kind: VIDEO_KIND, program: FFMPEG, option: 'ffmpeg', recipe: videoRecipe, files: ['image'] },
];

export const LOCAL_KINDS: readonly string[] = PRESETS.map((p) => p.kind);

export interface LocalEngineOptions extends Partial<Omit<CommandLimits, 'fileFields'>> {
  /** The programs' paths; undefined: looked up on PATH (of `env`); null: that kind is not served. */
  espeakNg?: string | null;
  pocketsphinx?: string | null;
  ffmpeg?: string | null;
}

export interface LocalEngine {
  /** One handler per kind served, for a worker's per-kind handler map. */
  handlers: Record<string, Engine>;
  /** The same as one function; a kind it does not serve fails the lease (retryable: another worker may). */
  handler: Engine;
  served: Array<{ kind: string; program: string }>;
  /** The kinds it cannot serve here, and what to install for them. */
  missing: Array<{ kind: string; program: LocalProgram }>;
}

/**
 * Real engines on the worker's own machine, as presets of the command engine (same runner,
 * limits, cancel and timeout): text-to-speech with espeak-ng, transcription with pocketsphinx,
 * video with ffmpeg. It serves the kinds whose program is installed.
 */
export function createLocalEngine(options: LocalEngineOptions = {}): LocalEngine {
  const env = options.env ?? process.env;
  const { espeakNg: _e, pocketsphinx: _p, ffmpeg: _f, ...rest } = options;
  const limits: CommandLimits = {
    ...DEFAULT_LIMITS,
    ...(Object.fromEntries(Object.entries(rest).filter(([, v]) => v !== undefined)) as Partial<CommandLimits>),
    env,
    fileFields: Object.fromEntries(PRESETS.map((p) => [p.kind, p.files])),
  };
  const handlers: Record<string, Engine> = {};
  const handler: Engine = async (kind, input, ctx) => {
    if (!handlers[kind]) throw Object.assign(new Error(`the local engine does not serve ${kind} here`), { code: 'unsupported_kind', retryable: true });
    return handlers[kind](kind, input, ctx);
  };
  const engine: LocalEngine = { handlers, handler, served: [], missing: [] };
  for (const preset of PRESETS) {
    const given = options[preset.option];
    const bin = given === null ? null : given === undefined ? findOnPath(preset.program.name, env) : findOnPath(given, env);
    if (!bin) {
      engine.missing.push({ kind: preset.kind, program: preset.program });
      continue;
    }
    const recipe = preset.recipe(bin);
    handlers[preset.kind] = (kind, input, ctx) => runCommandJob(recipe, kind, input, ctx, limits);
    engine.served.push({ kind: preset.kind, program: bin });
  }
  return engine;
}
