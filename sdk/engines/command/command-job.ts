import { withUsage } from '../usage.js';
import type { EngineContext, EngineResult } from '../types.js';
import { BAD_INPUT_EXIT, CommandError } from './command-error.js';
import { parseLine, type ProtocolEvent } from './line-protocol.js';
import { LogBudget } from './log-budget.js';
import { OutputDir } from './output-dir.js';
import { runProcess } from './process-runner.js';

/** One lease as a program sees it. */
export interface CommandJob {
  kind: string;
  /** The job's input, each file field holding the local path of its file. */
  input: Record<string, unknown>;
  /** `input.model`, or '' when the job names none. */
  model: string;
  runId: string;
  /** Where the program writes its artifacts (SWITCHYARD_OUTPUT_DIR). */
  outputDir: string;
  /** Scratch space next to it, removed with it: for files a recipe prepares. */
  workDir: string;
  ctx: EngineContext;
}

/**
 * What to run for a job and how to read it. `--engine command` has one recipe (the operator's
 * command, speaking the line protocol); the local engine's presets are recipes of their own,
 * run by the same runner with the same limits, cancel and timeout.
 */
export interface CommandRecipe {
  argv(job: CommandJob): string[] | Promise<string[]>;
  /** Its stdin; default: the input as JSON. */
  stdin?(job: CommandJob): string;
  /** Reads stdout itself instead of the line protocol (a program that knows nothing of Switchyard). */
  stdout?(line: string, job: CommandJob): void;
  /** A failed run whose last stderr lines match this blames the input: `bad_input`, whatever the exit status. */
  badInput?: RegExp;
  /** Output fields after a clean exit, merged over the ones the program reported; may write artifacts to outputDir. */
  result?(job: CommandJob): Promise<Record<string, unknown>>;
}

export interface CommandLimits {
  /** 0: none. */
  timeoutMs: number;
  killGraceMs: number;
  maxLineChars: number;
  logLinesPerSecond: number;
  logBurst: number;
  /** Streamed output beyond this many characters is dropped. */
  maxOutputChars: number;
  maxArtifacts: number;
  maxArtifactBytes: number;
  /** The file fields of each kind's input (models/kinds.ts fileFields). */
  fileFields: Record<string, string[]>;
  /** The environment the program inherits, less SWITCHYARD_* (the worker's own secrets). */
  env: NodeJS.ProcessEnv;
}

export const DEFAULT_LIMITS: Omit<CommandLimits, 'fileFields' | 'env'> = {
  timeoutMs: 3_600_000,
  killGraceMs: 5_000,
  maxLineChars: 256 * 1024,
  logLinesPerSecond: 50,
  logBurst: 200,
  maxOutputChars: 1_000_000,
  maxArtifacts: 64,
  maxArtifactBytes: 1024 * 1024 * 1024,
};

/** Result lines beyond this many characters in all are dropped: a complete report must fit in a frame (1 MB) anyway. */
const MAX_RESULT_CHARS = 1_000_000;
/** The last few stderr lines, short, for the failure message. */
const TAIL_LINES = 5;
const TAIL_CHARS = 300;

function abortError(): Error {
  return new DOMException('the job was aborted', 'AbortError');
}

async function localInput(kind: string, input: Record<string, unknown>, ctx: EngineContext, fields: string[]): Promise<Record<string, unknown>> {
  const out = { ...input };
  for (const field of fields) {
    if (typeof input[field] === 'string' && input[field] !== '') out[field] = (await ctx.inputFile(field)).path;
  }
  return out;
}

function jobEnv(base: NodeJS.ProcessEnv, job: CommandJob): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(base)) if (!k.startsWith('SWITCHYARD_')) env[k] = v;
  return { ...env, SWITCHYARD_RUN_ID: job.runId, SWITCHYARD_KIND: job.kind, SWITCHYARD_MODEL: job.model, SWITCHYARD_OUTPUT_DIR: job.outputDir };
}

/** Runs one lease with `recipe`: one process, its lines forwarded, its output directory uploaded. */
export async function runCommandJob(recipe: CommandRecipe, kind: string, rawInput: Record<string, unknown>, ctx: EngineContext, limits: CommandLimits): Promise<EngineResult> {
  if (ctx.signal.aborted) throw abortError();
  const dir = await OutputDir.create();
  try {
    const input = await localInput(kind, rawInput, ctx, limits.fileFields[kind] ?? []);
    const job: CommandJob = { kind, input, model: typeof rawInput.model === 'string' ? rawInput.model : '', runId: ctx.runId ?? '', outputDir: dir.out, workDir: dir.root, ctx };
    const argv = await recipe.argv(job);
    const logs = new LogBudget(limits.logLinesPerSecond, limits.logBurst, (line) => ctx.log(line));
    let progress = 0;
    let outputChars = 0;
    let outputCut = false;
    let streamed = '';
    let truncatedLines = 0;
    let resultChars = 0;
    const fields: Record<string, unknown> = {};
    const stderrTail: string[] = [];

    const apply = (e: ProtocolEvent) => {
      if (e.type === 'log') logs.log(e.line);
      else if (e.type === 'progress') {
        progress = Math.max(progress, Math.min(1, Math.max(0, e.progress)));
        ctx.progress(progress, e.message);
      } else if (e.type === 'result') {
        const before = resultChars;
        resultChars += JSON.stringify(e.fields).length;
        if (resultChars <= MAX_RESULT_CHARS) Object.assign(fields, e.fields);
        else if (before <= MAX_RESULT_CHARS) ctx.log(`(result lines over ${MAX_RESULT_CHARS} characters: the rest is dropped)`);
      } else if (outputChars + e.delta.length <= limits.maxOutputChars) {
        outputChars += e.delta.length;
        streamed += e.delta;
        ctx.output(e.delta);
      } else if (!outputCut) {
        outputCut = true;
        ctx.log(`(streamed output over ${limits.maxOutputChars} characters: the rest is dropped)`);
      }
    };
    const end = await runProcess({
      argv,
      env: jobEnv(limits.env, job),
      stdin: recipe.stdin ? recipe.stdin(job) : JSON.stringify(input),
      signal: ctx.signal,
      timeoutMs: limits.timeoutMs,
      killGraceMs: limits.killGraceMs,
      maxLineChars: limits.maxLineChars,
      onStdout: (line, truncated) => {
        if (truncated) truncatedLines++;
        if (recipe.stdout) recipe.stdout(line, job);
        // A cut line is no longer the JSON or command it began as.
        else if (truncated) logs.log(line);
        else for (const e of parseLine(line)) apply(e);
      },
      onStderr: (line, truncated) => {
        if (truncated) truncatedLines++;
        stderrTail.push(line.slice(0, TAIL_CHARS));
        if (stderrTail.length > TAIL_LINES) stderrTail.shift();
        logs.log(line);
      },
    });
    logs.flush();
    if (logs.dropped || truncatedLines) {
      ctx.log(`command output: ${end.stdoutBytes} bytes on stdout; ${logs.forwarded} log lines forwarded, ${logs.dropped} dropped; ${truncatedLines} lines cut to ${limits.maxLineChars} characters; at most ${end.maxHeld} characters held`);
    }
    const program = argv[0];
    const why = stderrTail.length ? `: ${stderrTail.join(' | ')}` : '';
    if (end.endedBy === 'abort' || ctx.signal.aborted) throw abortError();
    if (end.spawnError) {
      throw new CommandError('command_not_found', `cannot run ${program}: ${end.spawnError.code === 'ENOENT' ? 'no such program' : end.spawnError.message}`, true);
    }
    if (end.endedBy === 'timeout') throw new CommandError('command_timeout', `${program} ran past the time limit of ${limits.timeoutMs / 1000} s and was stopped`, false);
    if (end.code === BAD_INPUT_EXIT || (end.code !== 0 && recipe.badInput?.test(stderrTail.join('\n')))) throw new CommandError('bad_input', `${program} refused the input (exit status ${end.code})${why}`, false);
    if (end.code !== 0) throw new CommandError('command_failed', `${program} ${end.code === null ? `was killed by ${end.signal}` : `exited with status ${end.code}`}${why}`, true);
    // Before the artifacts are read: a recipe may write some (a transcript of what it parsed).
    const own = recipe.result ? await recipe.result(job) : {};
    const artifacts = await dir.artifacts({ maxFiles: limits.maxArtifacts, maxBytes: limits.maxArtifactBytes }, (line) => ctx.log(line));
    const extra = { ...(streamed && fields.text === undefined ? { text: streamed } : {}), ...fields, ...own };
    ctx.progress(1, 'done');
    return withUsage(kind, { artifacts, extra });
  } finally {
    await dir.remove();
  }
}
