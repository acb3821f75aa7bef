import { UsageError } from '../../usage-error.js';
import { stringFlag, type WorkerEngine } from './worker-engine.js';

/** `--command-timeout` when absent: an hour, the longest a job of the catalogue should take on one machine. */
const DEFAULT_TIMEOUT_S = 3600;

/**
 * `--engine command`: any local program, one process per lease (docs/engines.md, "command").
 * It serves the kinds named by --kinds; --models advertises models for each of them.
 */
export const commandEngine: WorkerEngine = {
  name: 'command',
  flags: { command: { type: 'string' }, 'command-shell': { type: 'boolean' }, 'command-timeout': { type: 'string' } },
  usage: `worker --gateway URL --token T --engine command --command "prog args" --kinds k1,k2
         [--command-shell] [--command-timeout S] [--models m1,m2]
                                         any local program as an engine, one process per job: the input
                                         as JSON on stdin (files as local paths), SWITCHYARD_RUN_ID,
                                         _KIND, _MODEL and _OUTPUT_DIR in its environment; stdout lines
                                         "progress 0.5 msg", "log line", "output text" (or JSON); the
                                         files it writes to the output directory are the artifacts; exit
                                         0 completes, 3 fails for good (bad input), others fail
                                         retryable; --command is split into words without a shell
                                         (quotes work) unless --command-shell; --command-timeout in
                                         seconds (default ${DEFAULT_TIMEOUT_S}, 0: none) (docs/engines.md)`,
  async create({ flags, kinds, models: ids }) {
    const line = stringFlag(flags, 'command');
    if (!line || !line.trim()) throw new UsageError('--engine command needs --command "program args": the program to run for each job');
    const timeout = stringFlag(flags, 'command-timeout');
    const timeoutS = timeout === undefined ? DEFAULT_TIMEOUT_S : Number(timeout);
    if (!Number.isFinite(timeoutS) || timeoutS < 0) throw new UsageError('--command-timeout must be a number of seconds >= 0 (0: no limit)');
    const { KINDS, fileFields } = await import('../../../../models/kinds.js');
    const { CommandLineError, createCommandEngine } = await import('../../../../sdk/engines/command/index.js');
    const files = Object.fromEntries(KINDS.map((k) => [k.kind, Object.keys(fileFields(k))]));
    let handler;
    try {
      handler = createCommandEngine({ command: line, shell: flags['command-shell'] === true, timeoutMs: Math.round(timeoutS * 1000), fileFields: files });
    } catch (err) {
      if (err instanceof CommandLineError) throw new UsageError(`--command: ${err.message}`);
      throw err;
    }
    const models = ids ? Object.fromEntries(kinds.map((k) => [k, ids.map((id) => ({ id }))])) : {};
    console.error(`switchyard worker: running ${flags['command-shell'] ? `sh -c ${JSON.stringify(line)}` : JSON.stringify(line)} for each job of ${kinds.join(', ')}`);
    return { handler, models, software: { name: 'switchyard-command-engine', engine: 'command' } };
  },
};
