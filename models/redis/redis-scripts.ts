import { createHash } from 'node:crypto';
import type { ChainableCommander, Redis } from 'ioredis';
import type { ScriptDefinition } from './script-definition.js';
import * as ALL_SCRIPTS from './scripts/index.js';

type ReplyOf<D> = D extends ScriptDefinition<infer Reply> ? Reply : never;

interface Prepared {
  sha: string;
  lua: string;
  keys: number | 'any';
  /** The sockets known to have run it (`pipe`): Redis has it cached for as long as they live. */
  loadedOn: WeakSet<object>;
}

/** A command's place in the results of `pipeline.exec()`: its error, or its reply. */
export type PipelineResult = [Error | null, unknown];

/** Redis's answer to EVALSHA of a script it does not have cached. */
export const isNoScript = (err: unknown): boolean => err instanceof Error && err.message.startsWith('NOSCRIPT');

/**
 * Runs the gateway's Redis scripts (models/redis/scripts/), always by SHA: EVALSHA, so a call
 * never ships a script's text. When Redis has not seen a script (its first call since Redis
 * started, or after SCRIPT FLUSH) the NOSCRIPT reply is answered with EVAL, which runs and
 * loads it at once: that one call costs a second round trip, every later one none.
 *
 * It works on any ioredis client it is given, auto-pipelined ones included (EVALSHA and EVAL
 * join the connection's batch as any command does; SCRIPT LOAD would not, which is why the
 * fallback is EVAL). The scripts are deliberately not registered with ioredis's
 * `defineCommand`, as BullMQ registers its own: ioredis copies every registered script into
 * each pipeline it builds, auto-pipelines included, which cost the request connection 6–7% of
 * the gateway's time with BullMQ's (docs/architecture.md, "One gateway process").
 *
 * `pipe` puts a script into a pipeline another library builds (a submission's create before
 * its BullMQ add, queues/create-and-enqueue.ts), where a NOSCRIPT cannot be answered within the
 * batch: the commands after it have run by then. So it sends EVAL on a socket until the script
 * has run there once, and EVALSHA after, as ioredis's `defineCommand` does; a NOSCRIPT can then
 * only follow a SCRIPT FLUSH (or a reconnect between building and sending the batch), and is
 * handed to the caller, which knows what the rest of its batch did.
 */
export class RedisScripts<Definitions extends Record<string, ScriptDefinition>> {
  private readonly scripts = new Map<string, Prepared>();

  constructor(definitions: Definitions) {
    for (const [name, { name: own, keys, lua }] of Object.entries(definitions)) {
      if (own !== name) throw new Error(`the Redis script registered as ${name} is named ${own}`);
      this.scripts.set(name, { sha: createHash('sha1').update(lua).digest('hex'), lua, keys, loadedOn: new WeakSet() });
    }
  }

  /** The names of the scripts it knows. */
  names(): string[] {
    return [...this.scripts.keys()];
  }

  /** A script's SHA1, the name Redis knows it by. */
  sha(name: keyof Definitions & string): string {
    return this.prepared(name).sha;
  }

  /** Runs the script `name` with these KEYS and ARGV on `redis`; resolves with its reply. */
  async run<Name extends keyof Definitions & string>(
    redis: Redis,
    name: Name,
    keys: string[],
    args: Array<string | number>,
  ): Promise<ReplyOf<Definitions[Name]>> {
    const script = this.prepared(name);
    if (script.keys !== 'any' && keys.length !== script.keys) throw new Error(`the Redis script ${name} wants ${script.keys} KEYS, was given ${keys.length}`);
    try {
      return (await redis.evalsha(script.sha, keys.length, ...keys, ...args)) as ReplyOf<Definitions[Name]>;
    } catch (err) {
      if (!isNoScript(err)) throw err;
      return (await redis.eval(script.lua, keys.length, ...keys, ...args)) as ReplyOf<Definitions[Name]>;
    }
  }

  /**
   * Appends the script `name` to `pipeline`, built on `redis` (ioredis's, or BullMQ's, which is
   * ioredis's with `runCommand` added), and returns what reads its result once the pipeline has
   * run: its reply, or its error thrown (`isNoScript` tells Redis did not have it: it did not run).
   */
  pipe<Name extends keyof Definitions & string>(
    pipeline: ChainableCommander,
    redis: Redis,
    name: Name,
    keys: string[],
    args: Array<string | number>,
  ): (result: PipelineResult) => ReplyOf<Definitions[Name]> {
    const script = this.prepared(name);
    if (script.keys !== 'any' && keys.length !== script.keys) throw new Error(`the Redis script ${name} wants ${script.keys} KEYS, was given ${keys.length}`);
    // The socket the batch will go out on if it is written now; a reconnect in between sends
    // it on another, which may lack the script: that is the NOSCRIPT the caller handles.
    const socket = redis.status === 'ready' ? (redis.stream as object | undefined) : undefined;
    if (socket && script.loadedOn.has(socket)) pipeline.evalsha(script.sha, keys.length, ...keys, ...args);
    else pipeline.eval(script.lua, keys.length, ...keys, ...args);
    return ([err, reply]) => {
      if (err) {
        if (socket && isNoScript(err)) script.loadedOn.delete(socket);
        throw err;
      }
      if (socket) script.loadedOn.add(socket);
      return reply as ReplyOf<Definitions[Name]>;
    };
  }

  private prepared(name: string): Prepared {
    const script = this.scripts.get(name);
    if (!script) throw new Error(`no Redis script is named ${name}`);
    return script;
  }
}

/** The gateway's scripts, every one of models/redis/scripts/: what every caller runs them with. */
export const redisScripts = new RedisScripts(ALL_SCRIPTS);
