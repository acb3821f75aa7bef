import { readFile, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { describeInput, MAX_INPUT_BYTES } from '../demo/files.js';
import { RECOGNIZER_RATE } from '../demo/transcribe.js';
import { readWav, resampledWav, WavError } from '../demo/wav.js';
import { CommandError, type CommandJob, type CommandRecipe } from '../command/index.js';

export const TRANSCRIBE_KIND = 'inference:audio:transcribe';

/** Longer clips are cut: the clip is resampled in memory, about 64 bytes a millisecond. */
const MAX_SECONDS = 600;
/** A word timing line of `-time yes`: `word start end confidence`. */
const SEGMENT = /^(\S+) (\d+(?:\.\d+)?) (\d+(?:\.\d+)?) (\d+(?:\.\d+)?)$/;
/** Silence, utterance bounds and noise are not words; `word(2)` is an alternate pronunciation of `word`. */
const FILLER = /^(<s>|<\/s>|<sil>|\[.*\]|\+\+.*\+\+)$/;
const MAX_WORDS = 200_000;

interface Word {
  word: string;
  start_s: number;
  end_s: number;
  confidence: number;
}

const badInput = (message: string) => new CommandError('bad_input', message, false);

/**
 * inference:audio:transcribe with pocketsphinx_continuous (0.8) and its en-us model: the clip
 * (a WAV of any rate, depth and channels) resampled to the 16 kHz mono its model wants, each
 * word with its start and end (`-time yes`). English only; other audio than WAV is `bad_input`.
 */
export function transcribeRecipe(pocketsphinx: string): CommandRecipe {
  const words = new WeakMap<CommandJob, Word[]>();
  const durations = new WeakMap<CommandJob, number>();
  return {
    async argv(job) {
      const language = typeof job.input.language === 'string' && job.input.language ? job.input.language : 'en';
      if (!/^en(?:$|[-_])/i.test(language)) throw badInput(`pocketsphinx has only an English model, not ${language}`);
      const file = await job.ctx.inputFile('audio');
      if (file.size > MAX_INPUT_BYTES) throw badInput(`the audio is ${file.size} bytes; at most ${MAX_INPUT_BYTES} are read`);
      const wav = await readFile(file.path);
      let info;
      try {
        info = readWav(wav);
      } catch (err) {
        if (err instanceof WavError) throw badInput(`input audio: ${err.message}; the local engine reads WAV only`);
        throw err;
      }
      if (info.durationS > MAX_SECONDS) job.ctx.log(`the clip is ${Math.round(info.durationS)} s long: only its first ${MAX_SECONDS} s are transcribed`);
      durations.set(job, Math.round(info.durationS * 1000) / 1000);
      words.set(job, []);
      const resampled = path.join(job.workDir, 'audio-16k.wav');
      await writeFile(resampled, resampledWav(wav, info, RECOGNIZER_RATE, MAX_SECONDS));
      return [pocketsphinx, '-infile', resampled, '-time', 'yes', '-logfn', os.devNull];
    },
    // Its stdout is the hypothesis of each utterance, then a timing line per word: the words are read from those.
    stdout(line, job) {
      const m = SEGMENT.exec(line.trim());
      const list = words.get(job)!;
      if (!m || FILLER.test(m[1]) || list.length >= MAX_WORDS) return;
      list.push({ word: m[1].replace(/\(\d+\)$/, ''), start_s: Number(m[2]), end_s: Number(m[3]), confidence: Number(m[4]) });
    },
    async result(job) {
      const list = words.get(job) ?? [];
      const text = list.map((w) => w.word).join(' ');
      await writeFile(path.join(job.outputDir, 'transcript.txt'), `${text}\n`);
      const file = await job.ctx.inputFile('audio');
      return {
        text,
        words: list,
        language: typeof job.input.language === 'string' && job.input.language ? job.input.language : 'en',
        duration_s: durations.get(job),
        recognizer: 'pocketsphinx_continuous',
        input: describeInput('audio', { file, data: Buffer.alloc(0) }),
      };
    },
  };
}
