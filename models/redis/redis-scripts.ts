import { createHash } from 'node:crypto';
import { socketFor, type RedisClient } from '../redis-connection.js';
import type { ScriptDefinition } from './script-definition.js';
import * as ALL_SCRIPTS from './scripts/index.js';

type ReplyOf<D> = D extends ScriptDefinition<infer Reply> ? Reply : never;

interface Prepared {
  sha: string;
  lua: string;
  keys: number | 'any';
  /** The sockets known to have run it (`send`): RedisClient has it cached for as long as they live. */
  loadedOn: WeakSet<object>;
}

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
 * `send` sends a script with commands of another library right behind it on the same
 * connection, which Redis runs after it (a submission's create, then its BullMQ add,
 * queues/create-and-enqueue.ts). A NOSCRIPT cannot be answered with EVAL there: the commands
 * behind it have run by then. So it sends EVAL on a socket until the script has run there once,
 * and EVALSHA after, as ioredis's `defineCommand` does; a NOSCRIPT can then only follow a
 * SCRIPT FLUSH (or a reconnect between the send and the write), and is handed to the caller,
 * which knows what the commands behind it did.
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
    redis: RedisClient,
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
   * Sends the script `name` on `redis` at once (joining the connection's auto-pipeline as any
   * command does), so a command the caller sends on `redis` right after it runs after it, in
   * the same round trip. Resolves with its reply; rejects with its error, a NOSCRIPT included
   * (`isNoScript`: it did not run), which is not answered here.
   */
  send<Name extends keyof Definitions & string>(redis: RedisClient, name: Name, keys: string[], args: Array<string | number>): Promise<ReplyOf<Definitions[Name]>> {
    const script = this.prepared(name);
    if (script.keys !== 'any' && keys.length !== script.keys) throw new Error(`the Redis script ${name} wants ${script.keys} KEYS, was given ${keys.length}`);
    // The socket it will go out on if it is written now (on a cluster, its slot's primary's); a
    // reconnect or a slot moving in between sends it on another, which may lack the script: that
    // is the NOSCRIPT the caller handles.
    const socket = socketFor(redis, keys[0]);
    const sent =
      socket && script.loadedOn.has(socket) ? redis.evalsha(script.sha, keys.length, ...keys, ...args) : redis.eval(script.lua, keys.length, ...keys, ...args);
    return sent.then(
      (reply) => {
        // A cluster node's socket is made on its first command: known only once this one ran.
        const ranOn = socket ?? socketFor(redis, keys[0]);
        if (ranOn) script.loadedOn.add(ranOn);
        return reply as ReplyOf<Definitions[Name]>;
      },
      (err: unknown) => {
        if (socket && isNoScript(err)) script.loadedOn.delete(socket);
        throw err;
      },
    );
  }

  private prepared(name: string): Prepared {
    const script = this.scripts.get(name);
    if (!script) throw new Error(`no Redis script is named ${name}`);
    return script;
  }
}

/** The gateway's scripts, every one of models/redis/scripts/: what every caller runs them with. */
export const redisScripts = new RedisScripts(ALL_SCRIPTS);
