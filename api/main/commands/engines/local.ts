import { UsageError } from '../../usage-error.js';
import { stringFlag, type WorkerEngine } from './worker-engine.js';

const TTS = 'inference:audio:text-to-speech';
const TRANSCRIBE = 'inference:audio:transcribe';
const VIDEO = 'inference:video:generate';

/**
 * `--engine local`: real engines on this machine (espeak-ng, pocketsphinx, ffmpeg), presets of
 * the command engine. Without --kinds it serves the kinds whose program is installed and says
 * which on stderr; a kind named in --kinds whose program is missing stops the command (exit 1).
 */
export const localEngine: WorkerEngine = {
  name: 'local',
  flags: { 'command-timeout': { type: 'string' } },
  usage: `worker --gateway URL --token T --engine local [--kinds k1,k2] [--command-timeout S] [--models m1,m2]
                                         real engines on this machine, one process per job:
                                         ${TTS} with espeak-ng (WAV),
                                         ${TRANSCRIBE} with pocketsphinx_continuous
                                         (en-us; words with timestamps), ${VIDEO}
                                         with ffmpeg (H.264 MP4); without --kinds, the kinds whose
                                         program is installed (docs/engines.md)`,
  defaultKinds: [TTS, TRANSCRIBE, VIDEO],
  onlyKinds: [TTS, TRANSCRIBE, VIDEO],
  async create({ flags, kinds, models: ids }) {
    const timeout = stringFlag(flags, 'command-timeout');
    const timeoutS = timeout === undefined ? 3600 : Number(timeout);
    if (!Number.isFinite(timeoutS) || timeoutS < 0) throw new UsageError('--command-timeout must be a number of seconds >= 0 (0: no limit)');
    const { createLocalEngine } = await import('../../../../sdk/engines/local/index.js');
    const engine = createLocalEngine({ timeoutMs: Math.round(timeoutS * 1000) });
    const missing = engine.missing.filter((m) => kinds.includes(m.kind));
    const asked = flags.kinds !== undefined && flags.kinds !== 'all';
    const why = (list: typeof missing) => list.map((m) => `${m.kind} needs ${m.program.name} (${m.program.install})`).join('; ');
    if (asked && missing.length) throw new Error(`--engine local cannot serve what --kinds asks: ${why(missing)}`);
    const served = engine.served.filter((s) => kinds.includes(s.kind));
    if (served.length === 0) throw new Error(`--engine local has nothing to serve on this machine: ${why(missing)}`);
    console.error(
      `switchyard worker: local engine serving ${served.map((s) => `${s.kind} with ${s.program}`).join(', ')}${missing.length ? `; not ${why(missing)}` : ''}`,
    );
    const servedKinds = served.map((s) => s.kind);
    const models = ids ? Object.fromEntries(servedKinds.map((k) => [k, ids.map((id) => ({ id }))])) : {};
    return { handler: engine.handler, kinds: servedKinds, models, software: { name: 'switchyard-local-engine', engine: 'local' } };
  },
};
