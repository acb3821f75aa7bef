import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { readWav } from '../demo/wav.js';
import { CommandError, type CommandRecipe } from '../command/index.js';

export const TTS_KIND = 'inference:audio:text-to-speech';

/** espeak-ng's voice names: a language or variant (`en-us`, `de`, `en+f3`), never an option. */
const VOICE = /^[A-Za-z0-9][A-Za-z0-9_+-]{0,39}$/;

const text = (input: Record<string, unknown>) => (typeof input.text === 'string' && input.text.trim() ? input.text : typeof input.prompt === 'string' ? input.prompt : '');

/**
 * inference:audio:text-to-speech with espeak-ng: the text goes in on stdin (any length, nothing
 * of it on the command line), speech.wav comes out. `voice` picks an espeak-ng voice; one it
 * does not have fails the job for good. A reference clip is not cloned: the job's log says so.
 */
export function speechRecipe(espeakNg: string): CommandRecipe {
  return {
    argv(job) {
      if (!text(job.input).trim()) throw new CommandError('bad_input', 'the input has no text to speak', false);
      const voice = job.input.voice;
      if (voice !== undefined && (typeof voice !== 'string' || !VOICE.test(voice))) throw new CommandError('bad_input', `voice ${JSON.stringify(voice)} is not an espeak-ng voice name (e.g. en-us, de, en+f3)`, false);
      if (job.input.reference_audio) job.ctx.log('espeak-ng does not clone voices: reference_audio is not used');
      return [espeakNg, ...(voice ? ['-v', voice] : []), '-w', path.join(job.outputDir, 'speech.wav')];
    },
    stdin: (job) => text(job.input),
    badInput: /voice does not exist/,
    async result(job) {
      const info = readWav(await readFile(path.join(job.outputDir, 'speech.wav')));
      return { engine: 'espeak-ng', duration_s: Math.round(info.durationS * 1000) / 1000 };
    },
  };
}
