import type { DemoFamily } from './job.js';
import { str } from './inputs.js';

const WORDS = ['the', 'demo', 'engine', 'heard', 'a', 'short', 'clip', 'about', 'switchyard', 'jobs', 'and', 'workers', 'running', 'on', 'remote', 'machines', 'today'];

/**
 * inference:audio:transcribe: the demo does not fetch the audio (an engine does no networking);
 * it writes a stable pseudo-transcript seeded by the input, naming the clip it stands for.
 */
export const transcribe: DemoFamily = async ({ input, rng }) => {
  const audio = str(input, 'audio');
  const source = audio.startsWith('data:') ? 'an inline clip' : audio.split(/[?#]/)[0].split('/').pop() || 'the clip';
  const words = Array.from({ length: 8 + rng.int(8) }, () => rng.pick(WORDS));
  const text = `Demo transcript of ${source}: ${words.join(' ')}.`;
  const language = str(input, 'language', 'en');
  return {
    artifacts: [{ name: 'transcript.txt', contentType: 'text/plain; charset=utf-8', data: Buffer.from(`${text}\n`, 'utf8') }],
    extra: { text, language },
  };
};
