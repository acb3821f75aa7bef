import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { createRedis } from '../models/redis-connection.js';
import { defineScript, type ScriptDefinition } from '../models/redis/script-definition.js';
import type { Redis } from 'ioredis';
import { RedisScripts, isNoScript, redisScripts } from '../models/redis/redis-scripts.js';
import * as ALL_SCRIPTS from '../models/redis/scripts/index.js';
import { REDIS_URL, cleanupPrefix, uniquePrefix, until } from './helpers/harness.js';
import { REDIS_SERVER, requireProgram } from './helpers/optional-program.js';
import { RedisServerProcess } from './helpers/redis-server-process.js';
import { scriptCommandsDuring } from './helpers/script-spy.js';

/**
 * The gateway's Redis scripts live in one place, models/redis/scripts/ (one file per script,
 * shared fragments in includes/), and are all run by one class, by SHA. A script written inline
 * elsewhere, a file the loader does not know, or a store interface that leans on Redis fails here.
 */

const ROOT = path.resolve(import.meta.dirname, '..');
const LAYERS = ['sdk', 'models', 'queues', 'dispatch', 'api'];
const SCRIPTS_DIR = 'models/redis/scripts';
const LOADER = 'models/redis/redis-scripts.ts';

function sourceFiles(dir: string): string[] {
  return readdirSync(path.join(ROOT, dir), { withFileTypes: true }).flatMap((e) => {
    const rel = `${dir}/${e.name}`;
    if (e.isDirectory()) return e.name === 'node_modules' || e.name === 'dist' ? [] : sourceFiles(rel);
    return /\.(ts|mts|mjs)$/.test(e.name) && !e.name.endsWith('.d.ts') ? [rel] : [];
  });
}

/** What only Lua meant for Redis contains: a command call, or the script's keys and arguments. */
const LUA = /\bredis\.p?call\(|\bKEYS\[|\bARGV\[/;
/** An ioredis call that runs a script: only the loader may make one. */
const EVAL = /\.eval(sha)?(Buffer)?\(/;

const camel = (file: string) => path.basename(file, '.ts').replace(/-(\w)/g, (_, c: string) => c.toUpperCase());

const isScript = (value: unknown): value is ScriptDefinition =>
  typeof value === 'object' && value !== null && typeof (value as ScriptDefinition).lua === 'string' && typeof (value as ScriptDefinition).name === 'string';

describe('Redis scripts in one place', () => {
  const files = LAYERS.flatMap(sourceFiles);
  const text = new Map(files.map((f) => [f, readFileSync(path.join(ROOT, f), 'utf8')]));

  it('are written only in models/redis/scripts/, and run only through RedisScripts', () => {
    const inFolder = files.filter((f) => f.startsWith(`${SCRIPTS_DIR}/`));
    // Not vacuous: the patterns do find the scripts where they belong.
    assert.ok(inFolder.filter((f) => LUA.test(text.get(f)!)).length >= 20, 'the scripts folder holds the scripts');
    assert.ok(EVAL.test(text.get(LOADER)!), 'the loader runs them');
    const luaElsewhere = files.filter((f) => !f.startsWith(`${SCRIPTS_DIR}/`) && LUA.test(text.get(f)!));
    assert.deepEqual(luaElsewhere, [], 'Lua outside models/redis/scripts/: make it a file there');
    const evalElsewhere = files.filter((f) => f !== LOADER && EVAL.test(text.get(f)!));
    assert.deepEqual(evalElsewhere, [], 'a script run without RedisScripts: call redisScripts.run');
  });

  it('are each known to the loader by the name of their file, and the loader knows no other', async () => {
    const scriptFiles = readdirSync(path.join(ROOT, SCRIPTS_DIR)).filter((f) => f.endsWith('.ts') && f !== 'index.ts');
    const found: string[] = [];
    for (const file of scriptFiles) {
      const module = (await import(pathToFileURL(path.join(ROOT, SCRIPTS_DIR, file)).href)) as Record<string, unknown>;
      const defined = Object.values(module).filter(isScript);
      assert.equal(defined.length, 1, `${file} defines one script`);
      assert.equal(defined[0].name, camel(file), `${file}'s script is named after its file`);
      assert.deepEqual((ALL_SCRIPTS as Record<string, unknown>)[defined[0].name], defined[0], `${file} is listed in ${SCRIPTS_DIR}/index.ts`);
      found.push(defined[0].name);
    }
    assert.deepEqual(redisScripts.names().sort(), found.sort());
  });

  it('leave the store interfaces free of Redis: models/stores.ts and what it imports reach no Redis module', () => {
    const seen = new Set<string>();
    const redisImports: string[] = [];
    const visit = (file: string) => {
      if (seen.has(file)) return;
      seen.add(file);
      const source = readFileSync(path.join(ROOT, file), 'utf8').replace(/\/\*[\s\S]*?\*\//g, '').replace(/^\s*\/\/.*$/gm, '');
      for (const [, spec] of source.matchAll(/^\s*(?:import|export)\b[^'"`;]*?\bfrom\s*['"]([^'"]+)['"]/gm)) {
        if (!spec.startsWith('.')) {
          if (/^(ioredis|bullmq)(\/|$)/.test(spec)) redisImports.push(`${file} -> ${spec}`);
          continue;
        }
        const target = path.posix.normalize(path.posix.join(path.posix.dirname(file), spec)).replace(/\.js$/, '.ts');
        if (target.startsWith('models/redis/') || target === 'models/redis-connection.ts') redisImports.push(`${file} -> ${target}`);
        else visit(target);
      }
    };
    visit('models/stores.ts');
    assert.ok(seen.has('models/types.ts'), 'the walk follows the imports');
    assert.deepEqual(redisImports, []);
  });
});

describe('RedisScripts', () => {
  const prefix = uniquePrefix('scripts');
  const redis = createRedis(REDIS_URL, { name: 'test-scripts' });
  const pipelined = createRedis(REDIS_URL, { name: 'test-scripts-auto', autoPipelining: true });

  after(async () => {
    await cleanupPrefix(prefix);
    redis.disconnect();
    pipelined.disconnect();
  });

  /** The script commands sent on `client` while `fn` runs, by name. */
  async function sent(client: typeof redis, fn: () => Promise<unknown>): Promise<string[]> {
    return (await scriptCommandsDuring(client, fn)).used;
  }

  /** A script no Redis has seen: its text (so its SHA) is new to this run. */
  const fresh = () =>
    new RedisScripts({
      count: defineScript<number>({ name: 'count', keys: 1, lua: `-- ${randomBytes(8).toString('hex')}\nreturn redis.call('INCRBY', KEYS[1], ARGV[1])` }),
    });

  it('compile in Redis, each under the SHA it is called by', async () => {
    for (const [name, script] of Object.entries(ALL_SCRIPTS)) {
      assert.equal(await redis.script('LOAD', script.lua), redisScripts.sha(name as keyof typeof ALL_SCRIPTS), name);
    }
  });

  it('runs a script Redis has not seen by loading it with that one call, and by its SHA alone after', async () => {
    const scripts = fresh();
    const key = `${prefix}:count`;
    assert.deepEqual(await redis.script('EXISTS', scripts.sha('count')), [0]);
    assert.deepEqual(await sent(redis, async () => assert.equal(await scripts.run(redis, 'count', [key], [2]), 2)), ['evalsha', 'eval']);
    assert.deepEqual(await redis.script('EXISTS', scripts.sha('count')), [1]);
    assert.deepEqual(await sent(redis, async () => assert.equal(await scripts.run(redis, 'count', [key], [3]), 5)), ['evalsha']);
  });

  it('runs on an auto-pipelined connection, a burst of first calls included', async () => {
    const scripts = fresh();
    const key = `${prefix}:burst`;
    const replies = await Promise.all(Array.from({ length: 20 }, () => scripts.run(pipelined, 'count', [key], [1])));
    assert.deepEqual([...replies].sort((a, b) => a - b), Array.from({ length: 20 }, (_, i) => i + 1));
    assert.deepEqual(await sent(pipelined, () => scripts.run(pipelined, 'count', [key], [1])), ['evalsha']);
  });

  it('refuses a call with the wrong number of keys, before sending anything', async () => {
    const scripts = fresh();
    const calls = await sent(redis, () => assert.rejects(scripts.run(redis, 'count', [], [1]), /wants 1 KEYS, was given 0/));
    assert.deepEqual(calls, []);
  });
});

/**
 * `send` sends a script with commands behind it on the same connection, where a NOSCRIPT could
 * not be answered before they run: EVAL until it has run on the socket, EVALSHA after. On a
 * Redis of its own, which these flush and restart.
 */
describe('RedisScripts.send', function () {
  this.timeout(30_000);
  let server: RedisServerProcess;
  let redis: Redis;
  const scripts = new RedisScripts({ count: defineScript<number>({ name: 'count', keys: 1, lua: `return redis.call('INCRBY', KEYS[1], ARGV[1])` }) });
  /** `count` sent with an INCR right behind it: which command carried the script, its reply (or error) and the INCR's. */
  const behind = async (by: number) => {
    const { used, result } = await scriptCommandsDuring(redis, async () => {
      const script = scripts.send(redis, 'count', ['n'], [by]);
      const after = redis.incr('after');
      return { reply: await script.catch((err: unknown) => err), after: await after };
    });
    return { used, ...result };
  };

  before(async function () {
    server = await RedisServerProcess.start(requireProgram(this, REDIS_SERVER));
    redis = createRedis(server.url, { name: 'test-send', autoPipelining: true }) as Redis;
    await redis.ping();
  });
  after(async () => {
    redis?.disconnect();
    await server?.stop();
  });

  it('sends the text until the script ran on the socket, then its SHA', async () => {
    assert.deepEqual(await behind(2), { used: ['eval'], reply: 2, after: 1 });
    assert.deepEqual(await behind(3), { used: ['evalsha'], reply: 5, after: 2 });
  });

  it('hands a NOSCRIPT to the caller (the command behind it ran), and sends the text again after it', async () => {
    await redis.script('FLUSH');
    const flushed = await behind(1);
    assert.deepEqual(flushed.used, ['evalsha']);
    assert.ok(isNoScript(flushed.reply), String(flushed.reply));
    assert.equal(flushed.after, 3, 'the INCR behind it ran');
    assert.equal(await redis.get('n'), '5', 'the script did not');
    assert.deepEqual(await behind(1), { used: ['eval'], reply: 6, after: 4 });
  });

  it('sends the text again on the socket of a reconnection (a restarted Redis has no scripts)', async () => {
    await server.kill();
    await server.restart();
    await until('the connection back', async () => redis.status === 'ready' && (await redis.ping().catch(() => null)) === 'PONG');
    const restarted = await behind(1);
    assert.deepEqual([restarted.used, restarted.reply], [['eval'], 7]);
  });
});
