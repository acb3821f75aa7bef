/**
 * One of the gateway's Redis scripts, as a file of models/redis/scripts/ defines it: its Lua
 * source (with its includes already assembled, at module load), how many KEYS it takes and,
 * as a type only, what it replies. `RedisScripts` (redis-scripts.ts) is what runs it.
 */
export interface ScriptDefinition<Reply = unknown> {
  /** The name it is called by: its file's name in camelCase (`create-run.ts`: `createRun`). */
  readonly name: string;
  /**
   * How many of a call's leading arguments are KEYS (BullMQ writes it into the file name,
   * `addLog-2.lua`), or 'any' for a script that takes a list of keys of any length.
   */
  readonly keys: number | 'any';
  readonly lua: string;
  /** Never set: carries the reply's type to `RedisScripts.run`. */
  readonly reply?: Reply;
}

/** Declares a script; `Reply` is what its Lua returns, as ioredis decodes it. */
export function defineScript<Reply>(definition: { name: string; keys: number | 'any'; lua: string }): ScriptDefinition<Reply> {
  return definition;
}
