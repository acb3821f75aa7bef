import { cogEngine } from './cog.js';
import { comfyUiEngine } from './comfyui.js';
import { commandEngine } from './command.js';
import { demoEngine } from './demo.js';
import { localEngine } from './local.js';
import { openAiEngine } from './openai.js';
import type { WorkerEngine } from './worker-engine.js';

export type { EngineSetup, WorkerEngine } from './worker-engine.js';
export { modelList } from './worker-engine.js';

/** The engines of `switchyard worker --engine`, in the order --help lists them; demo is the default. */
export const ENGINES: WorkerEngine[] = [demoEngine, openAiEngine, comfyUiEngine, cogEngine, commandEngine, localEngine];

/** Every engine's own flags, for the command line parser. */
export const ENGINE_FLAGS: Record<string, { type: 'string' | 'boolean' }> = Object.assign({}, ...ENGINES.map((e) => e.flags));
