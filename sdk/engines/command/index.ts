import type { Engine } from '../types.js';
import { splitCommandLine } from './command-line.js';
import { DEFAULT_LIMITS, runCommandJob, type CommandLimits, type CommandRecipe } from './command-job.js';

export { BAD_INPUT_EXIT, CommandError } from './command-error.js';
export { CommandLineError, splitCommandLine } from './command-line.js';
export { DEFAULT_LIMITS, runCommandJob, type CommandJob, type CommandLimits, type CommandRecipe } from './command-job.js';
export { contentTypeOf } from './output-dir.js';

export interface CommandEngineOptions extends Partial<CommandLimits> {
  /** The program and its arguments: an argv, or one line split by splitCommandLine (no shell). */
  command: string | string[];
  /** Run it as `sh -c <command>` instead: pipes and variables work, and the operator owns the quoting. */
  shell?: boolean;
}

/**
 * Any local program as an engine, one process per lease (docs/engines.md, "command"): the input
 * as JSON on stdin (file fields as local paths), the job in SWITCHYARD_* variables, progress,
 * logs, streamed output and result fields as stdout lines, artifacts as the files it writes to
 * SWITCHYARD_OUTPUT_DIR, its exit status as the outcome.
 */
export function createCommandEngine(options: CommandEngineOptions): Engine {
  const argv = options.shell ? ['/bin/sh', '-c', String(options.command)] : typeof options.command === 'string' ? splitCommandLine(options.command) : [...options.command];
  if (argv.length === 0 || argv[0] === '') throw new TypeError('command is empty');
  const limits: CommandLimits = { ...DEFAULT_LIMITS, fileFields: {}, env: process.env, ...withoutUndefined(options) };
  const recipe: CommandRecipe = { argv: () => argv };
  return (kind, input, ctx) => runCommandJob(recipe, kind, input, ctx, limits);
}

function withoutUndefined(options: CommandEngineOptions): Partial<CommandLimits> {
  const { command: _c, shell: _s, ...rest } = options;
  return Object.fromEntries(Object.entries(rest).filter(([, v]) => v !== undefined)) as Partial<CommandLimits>;
}
