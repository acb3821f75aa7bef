import type { Engine } from '../../../../sdk/engines/types.js';
import type { WorkerModel } from '../../../../sdk/protocol/index.js';
import { UsageError } from '../../usage-error.js';

/** What an engine hands the worker: its handler, the models it advertises per kind, how it names itself. */
export interface EngineSetup {
  handler: Engine;
  models: Record<string, WorkerModel[]>;
  software: { name: string; engine: string; version?: string };
  /**
   * The kinds it serves when they come from its setup rather than from --kinds: comfyui's are
   * those of its templates, local's those whose program is installed; unset: what --kinds named.
   */
  kinds?: string[];
  /** Released when the worker stops (a child process, a socket to the backend). */
  close?: () => Promise<void>;
  /** Engines in front of a backend server: how the worker asks whether it answers again after a lease found it gone. */
  backend?: { probe: (signal: AbortSignal) => Promise<unknown> };
}

/** The worker command's flags as parsed, with the values of every engine's own flags. */
export type EngineFlags = Record<string, string | boolean | undefined>;

export interface EngineArgs {
  flags: EngineFlags;
  env: NodeJS.ProcessEnv;
  /** The kinds the worker serves ("all" expanded). */
  kinds: string[];
  /** `--models a,b`, trimmed and deduplicated; undefined when the flag is absent. */
  models: string[] | undefined;
}

/**
 * One `--engine` of `switchyard worker`: its own flags (refused with any other engine), the kinds
 * it serves when `--kinds` is left out, and how it is built from the flags. Each engine sits in
 * its own file of this folder; index.ts lists them.
 */
export interface WorkerEngine {
  name: string;
  /** Flags only this engine takes, as node:util parseArgs options. */
  flags: Record<string, { type: 'string' | 'boolean' }>;
  /** Lines for `switchyard --help`, starting with the command line. */
  usage: string;
  /** The kinds it serves when --kinds is absent; undefined: --kinds is required. */
  defaultKinds?: string[];
  /** The kinds it serves when --kinds is absent, when its own flags decide them (demo --rank: the ranked model's kind); undefined: defaultKinds. Throws a UsageError for a bad flag. */
  kindsFor?(flags: EngineFlags): string[] | undefined;
  /** The only kinds it can serve; undefined: any kind. */
  onlyKinds?: string[];
  create(args: EngineArgs): Promise<EngineSetup>;
}

/** `--models a,b`: the names, trimmed and deduplicated; undefined when the flag is absent. */
export function modelList(flag: string | undefined): string[] | undefined {
  if (flag === undefined) return undefined;
  const models = [...new Set(flag.split(',').map((m) => m.trim()).filter(Boolean))];
  if (models.length === 0) throw new UsageError('--models is empty: name at least one model, e.g. --models demo-llm');
  return models;
}

/** A string flag's value; a boolean or absent flag is undefined. */
export const stringFlag = (flags: EngineFlags, name: string): string | undefined => (typeof flags[name] === 'string' ? (flags[name] as string) : undefined);
