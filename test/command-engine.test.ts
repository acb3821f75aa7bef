import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { KINDS, fileFields } from '../models/kinds.js';
import { createCommandEngine, splitCommandLine, type CommandEngineOptions } from '../sdk/engines/command/index.js';
import type { EngineContext, EngineResult, InputFile } from '../sdk/engines/types.js';
import { PNG } from 'pngjs';
import { REDIS_URL, TestGateway, cleanupPrefix, uniquePrefix, until } from './helpers/harness.js';
import { PYTHON3, requireProgram } from './helpers/optional-program.js';

/**
 * `--engine command`: real programs (node and sh scripts written here) run by the engine, one
 * process per job, and once through `switchyard worker` against a real gateway.
 */

const TMP = mkdtempSync(path.join(os.tmpdir(), 'sy-command-engine-'));
after(() => rmSync(TMP, { recursive: true, force: true }));
const FILE_FIELDS = Object.fromEntries(KINDS.map((k) => [k.kind, Object.keys(fileFields(k))]));
const NODE = process.execPath;

let scripts = 0;
/** A node script in the temp dir; its argv for the engine. */
function nodeScript(source: string): string[] {
  const file = path.join(TMP, `script-${scripts++}.mjs`);
  writeFileSync(file, source);
  return [NODE, file];
}
function shScript(source: string): string[] {
  const file = path.join(TMP, `script-${scripts++}.sh`);
  writeFileSync(file, source, { mode: 0o755 });
  return ['/bin/sh', file];
}

interface Seen {
  logs: string[];
  progress: Array<[number, string | undefined]>;
  deltas: string[];
}

function context(over: Partial<EngineContext> = {}, files: Record<string, Buffer> = {}): { ctx: EngineContext; seen: Seen } {
  const seen: Seen = { logs: [], progress: [], deltas: [] };
  const ctx: EngineContext = {
    runId: 'run_test123',
    signal: new AbortController().signal,
    progress: (p, m) => void seen.progress.push([p, m]),
    log: (line) => void seen.logs.push(line),
    output: (d) => void seen.deltas.push(d),
    inputFile: async (field): Promise<InputFile> => {
      const data = files[field];
      if (!data) throw Object.assign(new Error(`no file for ${field}`), { code: 'bad_input', retryable: false });
      const file = path.join(TMP, `input-${scripts++}-${field}`);
      writeFileSync(file, data);
      return { path: file, size: data.length, contentType: 'image/png', sha256: createHash('sha256').update(data).digest('hex') };
    },
    ...over,
  };
  return { ctx, seen };
}

const engine = (command: string[], o: Partial<CommandEngineOptions> = {}) => createCommandEngine({ command, fileFields: FILE_FIELDS, ...o });

async function failure(p: Promise<EngineResult>): Promise<{ code: string; retryable: boolean; message: string; name: string }> {
  try {
    await p;
  } catch (err) {
    return err as { code: string; retryable: boolean; message: string; name: string };
  }
  assert.fail('the job succeeded');
}

/** Whether a process of that pid runs (a zombie, exited but not yet reaped by its parent, does not). */
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  try {
    return !/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return false;
  }
}

describe('the command engine', function () {
  this.timeout(60_000);

  describe('splitting --command into words without a shell', () => {
    it('splits at blanks and keeps quoted words whole', () => {
      assert.deepEqual(splitCommandLine(`python3  gen.py --name 'a b' "c \\"d\\"" e\\ f ''`), ['python3', 'gen.py', '--name', 'a b', 'c "d"', 'e f', '']);
      assert.deepEqual(splitCommandLine('echo $HOME | cat'), ['echo', '$HOME', '|', 'cat']);
    });
    it('refuses an unclosed quote and an empty command', () => {
      assert.throws(() => splitCommandLine(`say 'hi`), /unclosed single quote/);
      assert.throws(() => splitCommandLine('   '), /empty/);
    });
  });

  it('gives the program its input on stdin (file fields as local paths) and the job in its environment, and forwards progress, logs, output and result fields', async () => {
    const png = Buffer.from('89504e470d0a1a0a0000', 'hex');
    const { ctx, seen } = context({}, { image: png });
    const run = engine(
      nodeScript(`
        import { readFileSync } from 'node:fs';
        const input = JSON.parse(readFileSync(0, 'utf8'));
        const e = process.env;
        console.log('progress 0.25 loading the model');
        console.log(JSON.stringify({ progress: 0.5, message: 'half way' }));
        console.log('progress 0.4 going back is ignored');
        console.log('log plain log line');
        console.log(JSON.stringify({ log: 'json log line' }));
        console.log('a stray line');
        console.error('a line on stderr');
        console.log('output Hello,');
        console.log(JSON.stringify({ output: ' world\\n' }));
        console.log(JSON.stringify({ result: { frames: 3, image_bytes: readFileSync(input.image).length, stdin: input, env: [e.SWITCHYARD_RUN_ID, e.SWITCHYARD_KIND, e.SWITCHYARD_MODEL, e.SWITCHYARD_WORKER_TOKEN ?? null] } }));
      `),
    );
    process.env.SWITCHYARD_WORKER_TOKEN = 'swt_secret';
    let result: EngineResult;
    try {
      result = await run('inference:3d:image-to-mesh', { image: 'file_abc', model: 'mesh-xl', seed: 7 }, ctx);
    } finally {
      delete process.env.SWITCHYARD_WORKER_TOKEN;
    }
    const extra = result.extra as Record<string, any>;
    assert.equal(extra.image_bytes, png.length);
    assert.equal(extra.stdin.seed, 7);
    assert.ok(path.isAbsolute(extra.stdin.image), 'the file field holds a local path');
    assert.deepEqual(extra.env, ['run_test123', 'inference:3d:image-to-mesh', 'mesh-xl', null], 'the worker token is not passed on');
    assert.equal(extra.frames, 3);
    assert.equal(extra.text, 'Hello, world\n', 'the streamed output is the text');
    assert.deepEqual(seen.deltas, ['Hello,', ' world\n']);
    assert.deepEqual(seen.progress, [[0.25, 'loading the model'], [0.5, 'half way'], [0.5, 'going back is ignored'], [1, 'done']]);
    assert.deepEqual(seen.logs.sort(), ['a line on stderr', 'a stray line', 'json log line', 'plain log line']);
    assert.deepEqual(result.artifacts, []);
  });

  it('uploads the files written to the output directory, typed by their extension, and removes the directory', async () => {
    const { ctx } = context();
    const run = engine(
      shScript(`
        set -e
        echo "$SWITCHYARD_OUTPUT_DIR" > "$SWITCHYARD_OUTPUT_DIR/where.txt"
        printf 'RIFF' > "$SWITCHYARD_OUTPUT_DIR/speech.wav"
        printf '\\211PNG' > "$SWITCHYARD_OUTPUT_DIR/image.png"
        printf '{}' > "$SWITCHYARD_OUTPUT_DIR/meta.json"
        printf 'x' > "$SWITCHYARD_OUTPUT_DIR/clip.mp4"
        printf 'x' > "$SWITCHYARD_OUTPUT_DIR/blob.bin"
        printf 'x' > "$SWITCHYARD_OUTPUT_DIR/.partial"
        mkdir "$SWITCHYARD_OUTPUT_DIR/sub"
      `),
    );
    const result = await run('inference:image:generate', { prompt: 'x' }, ctx);
    assert.deepEqual(
      result.artifacts.map((a) => [a.name, a.contentType]),
      [
        ['blob.bin', 'application/octet-stream'],
        ['clip.mp4', 'video/mp4'],
        ['image.png', 'image/png'],
        ['meta.json', 'application/json'],
        ['speech.wav', 'audio/wav'],
        ['where.txt', 'text/plain; charset=utf-8'],
      ],
    );
    assert.equal(result.artifacts.find((a) => a.name === 'image.png')!.data.toString('latin1'), '\x89PNG');
    const dir = result.artifacts.find((a) => a.name === 'where.txt')!.data.toString().trim();
    assert.ok(dir.startsWith(os.tmpdir()), dir);
    assert.equal(existsSync(dir), false, 'the output directory is removed after the job');
  });

  it('fails retryable on a non-zero exit, with the end of stderr in the message', async () => {
    const err = await failure(engine(shScript('echo "out of GPU memory" >&2; exit 1'))('inference:image:generate', { prompt: 'x' }, context().ctx));
    assert.equal(err.code, 'command_failed');
    assert.equal(err.retryable, true);
    assert.match(err.message, /exited with status 1: out of GPU memory/);
  });

  it('fails for good (bad_input) when the program exits 3', async () => {
    const err = await failure(engine(shScript('echo "prompt too long" >&2; exit 3'))('inference:image:generate', { prompt: 'x' }, context().ctx));
    assert.equal(err.code, 'bad_input');
    assert.equal(err.retryable, false);
    assert.match(err.message, /refused the input \(exit status 3\): prompt too long/);
  });

  it('fails retryable when the program cannot be started', async () => {
    const err = await failure(engine(['/nonexistent/generate'])('inference:image:generate', { prompt: 'x' }, context().ctx));
    assert.equal(err.code, 'command_not_found');
    assert.equal(err.retryable, true);
  });

  it('stops a program that runs past the time limit (SIGTERM to its group), failing for good', async () => {
    const pidFile = path.join(TMP, 'timeout.pid');
    const { ctx } = context();
    const err = await failure(engine(shScript(`sleep 600 & echo $! > ${pidFile}; wait`), { timeoutMs: 300 })('inference:image:generate', { prompt: 'x' }, ctx));
    assert.equal(err.code, 'command_timeout');
    assert.equal(err.retryable, false);
    assert.match(err.message, /time limit of 0.3 s/);
    const sleeper = Number(readFileSync(pidFile, 'utf8'));
    await until('the program started by the script is gone', async () => !alive(sleeper));
  });

  it('on cancel, ends the program and everything it started, and rejects only once they are gone', async () => {
    const ac = new AbortController();
    const { ctx, seen } = context({ signal: ac.signal });
    const job = engine(shScript('sleep 600 & echo "log pids $$ $!"; wait'))('inference:image:generate', { prompt: 'x' }, ctx);
    const line = await until('the script said its pids', async () => seen.logs.find((l) => l.startsWith('pids ')));
    const pids = line.split(' ').slice(1).map(Number);
    assert.ok(pids.every(alive), 'running before the cancel');
    ac.abort();
    const err = await failure(job);
    assert.equal(err.name, 'AbortError');
    assert.equal(alive(pids[0]), false, 'the script is gone when the job rejects');
    await until('the sleep it started is gone', async () => !alive(pids[1]));
  });

  it('kills a program that ignores SIGTERM once the grace period is over', async () => {
    const ac = new AbortController();
    const { ctx, seen } = context({ signal: ac.signal });
    const job = engine(shScript(`trap '' TERM; echo "log pid $$"; while :; do sleep 0.05; done`), { killGraceMs: 200 })('inference:image:generate', { prompt: 'x' }, ctx);
    const pid = Number((await until('the script said its pid', async () => seen.logs.find((l) => l.startsWith('pid ')))).split(' ')[1]);
    ac.abort();
    assert.equal((await failure(job)).name, 'AbortError');
    assert.equal(alive(pid), false);
  });

  it('runs the command through sh -c with shell: true', async () => {
    const { ctx } = context();
    const result = await engine([], { command: 'echo "{\\"result\\":{\\"kind\\":\\"$SWITCHYARD_KIND\\"}}" | cat', shell: true })('inference:rig', { mesh: '' }, ctx);
    assert.equal(result.extra?.kind, 'inference:rig');
  });

  it('stays bounded when a program floods stdout: 200 MB of lines and one 50 MB line', async function () {
    this.timeout(180_000);
    const { ctx, seen } = context();
    const maxLineChars = 64 * 1024;
    const run = engine(
      nodeScript(`
        import { writeSync } from 'node:fs';
        const huge = 'y'.repeat(1024 * 1024);
        for (let i = 0; i < 50; i++) writeSync(1, huge);
        writeSync(1, '\\n');
        const chunk = ('x'.repeat(99) + '\\n').repeat(10_000); // 1 MB, 10 000 lines
        for (let i = 0; i < 200; i++) writeSync(1, chunk);
        writeSync(1, JSON.stringify({ result: { first: 1 } }) + '\\n');
        const bulky = JSON.stringify({ result: { bulk: 'z'.repeat(60_000) } }) + '\\n'; // under the line limit
        for (let i = 0; i < 20; i++) writeSync(1, bulky);
        writeSync(1, JSON.stringify({ result: { late: 1 } }) + '\\n');
        writeSync(1, 'output done\\n');
      `),
      { maxLineChars },
    );
    const result = await run('inference:llm:text-generate', { prompt: 'x' }, ctx);
    assert.equal(result.extra?.text, 'done', 'protocol lines after the flood still work');
    assert.equal(result.extra?.first, 1);
    assert.equal(result.extra?.late, undefined, 'result lines past 1 MB are dropped');
    assert.ok(seen.logs.includes('(result lines over 1000000 characters: the rest is dropped)'));
    const summary = seen.logs.find((l) => l.startsWith('command output:'));
    assert.ok(summary, seen.logs.slice(-3).join('\n'));
    const [, bytes, forwarded, dropped, cut, held] = /^command output: (\d+) bytes on stdout; (\d+) log lines forwarded, (\d+) dropped; (\d+) lines cut to \d+ characters; at most (\d+) characters held$/.exec(summary)!.map(Number);
    assert.ok(bytes > 50 * 1024 * 1024 + 200 * 1_000_000, String(bytes));
    assert.equal(forwarded + dropped, 2_000_001, 'every log line counted');
    assert.ok(forwarded < 20_000, `${forwarded} log lines forwarded`);
    assert.ok(seen.logs.length < 21_000, `${seen.logs.length} lines reached the job's log`);
    assert.equal(cut, 1);
    assert.ok(held <= maxLineChars, `${held} characters held`);
    const huge = seen.logs.find((l) => l.startsWith('yyy'));
    assert.equal(huge?.length, maxLineChars, 'the long line, cut');
  });
});

describe('the example script of docs/engines.md', function () {
  this.timeout(60_000);
  let python: string;
  before(function () {
    python = requireProgram(this, PYTHON3);
  });

  it('draws the image, reports its size, and refuses an input without a prompt for good', async () => {
    const doc = readFileSync(path.join(import.meta.dirname, '..', 'docs', 'engines.md'), 'utf8');
    const source = /### An example script[\s\S]*?```python\n([\s\S]*?)```/.exec(doc)![1];
    const file = path.join(TMP, 'gradient.py');
    writeFileSync(file, source);
    const { ctx, seen } = context();
    const result = await engine([python, file])('inference:image:generate', { prompt: 'a fox', width: 64 }, ctx);
    assert.deepEqual(result.extra, { width: 64, height: 64 });
    assert.deepEqual(result.artifacts.map((a) => [a.name, a.contentType]), [['image.png', 'image/png']]);
    const image = PNG.sync.read(result.artifacts[0].data);
    assert.deepEqual([image.width, image.height], [64, 64]);
    assert.deepEqual(seen.progress.map(([p]) => p), [0.1, 0.8, 1]);
    assert.match(seen.logs.join('\n'), /wrote \d+ bytes/);
    const err = await failure(engine([python, file])('inference:image:generate', { width: 64 }, context().ctx));
    assert.deepEqual([err.code, err.retryable], ['bad_input', false]);
    assert.match(err.message, /the input has no prompt/);
  });
});

describe('switchyard worker --engine command', function () {
  this.timeout(120_000);
  const prefix = uniquePrefix('command-engine-cli');
  let gw: TestGateway, key: string, token: string;

  before(async () => {
    gw = await new TestGateway(prefix).start();
    ({ key } = await gw.account(100));
    token = await gw.workerToken();
  });
  after(async () => {
    await gw?.stop();
    await cleanupPrefix(prefix);
  });

  it('runs jobs with the program: a file input as a local path, its events, artifacts and output fields; a cancel ends it', async () => {
    const script = nodeScript(`
      import { copyFileSync, readFileSync, writeFileSync } from 'node:fs';
      const input = JSON.parse(readFileSync(0, 'utf8'));
      if (input.pid_file) {
        // Holds its lease until canceled.
        writeFileSync(input.pid_file, String(process.pid));
        setInterval(() => {}, 1000);
      } else {
      console.log('progress 0.5 copying');
      console.log('log got ' + readFileSync(input.image).length + ' bytes');
      copyFileSync(input.image, process.env.SWITCHYARD_OUTPUT_DIR + '/echo.png');
      writeFileSync(process.env.SWITCHYARD_OUTPUT_DIR + '/note.txt', 'model ' + process.env.SWITCHYARD_MODEL);
      console.log(JSON.stringify({ result: { run_id: process.env.SWITCHYARD_RUN_ID } }));
      }
    `);
    const pixel = Buffer.from('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==', 'base64');
    const env = { ...process.env, REDIS_URL, LOG_LEVEL: 'warn', SWITCHYARD_WORKER_TOKEN: '' };
    const child = spawn(
      NODE,
      ['api/bin/switchyard.mjs', 'worker', '--gateway', gw.url, '--token', token, '--engine', 'command', '--command', script.map((w) => `'${w}'`).join(' '), '--kinds', 'inference:3d:image-to-mesh', '--models', 'echo-1'],
      { env, stdio: ['ignore', 'ignore', 'pipe'] },
    );
    let stderr = '';
    child.stderr.on('data', (d) => (stderr += d));
    const exited = new Promise<number | null>((resolve) => child.on('exit', resolve));
    try {
      const caps = async () => (await gw.request('GET', '/v1/capabilities', { key })).body.kinds.find((k: { kind: string }) => k.kind === 'inference:3d:image-to-mesh');
      await until('the worker is registered', async () => (await caps()).models?.some((m: { id: string; workers: number }) => m.id === 'echo-1' && m.workers === 1), 60_000);
      const submitted = await gw.submit(key, { kind: 'inference:3d:image-to-mesh', input: { image: `data:image/png;base64,${pixel.toString('base64')}`, model: 'echo-1' } });
      assert.equal(submitted.status, 202, submitted.text);
      const runId = submitted.body.run_id as string;
      const job = await until('the job has ended', async () => {
        const res = await gw.request('GET', `/v1/jobs/${runId}`, { key });
        return ['succeeded', 'failed'].includes(res.body.status) && res.body;
      }, 60_000);
      assert.equal(job.status, 'succeeded', JSON.stringify(job));
      assert.equal(job.output.run_id, runId);
      assert.deepEqual(job.output.files.map((f: { name: string; content_type: string }) => [f.name, f.content_type]), [['echo.png', 'image/png'], ['note.txt', 'text/plain; charset=utf-8']]);
      assert.deepEqual(Buffer.from(await (await fetch(job.output.urls[0])).arrayBuffer()), pixel);
      assert.equal(await (await fetch(job.output.urls[1])).text(), 'model echo-1');
      const events = await (await fetch(`${gw.url}/v1/jobs/${runId}/events?after=0`, { headers: { authorization: `Bearer ${key}` } })).text();
      assert.match(events, /event: progress\ndata: \{"progress":0.5,"message":"copying"/);
      assert.match(events, new RegExp(`event: log\\ndata: \\{"line":"got ${pixel.length} bytes"`));

      // A cancel reaches the program: the worker ends it, and the job ends canceled.
      const pidFile = path.join(TMP, 'cli-cancel.pid');
      const held = await gw.submit(key, { kind: 'inference:3d:image-to-mesh', input: { image: `data:image/png;base64,${pixel.toString('base64')}`, model: 'echo-1', pid_file: pidFile } });
      const pid = await until('the program is running', async () => existsSync(pidFile) && Number(readFileSync(pidFile, 'utf8')), 60_000);
      assert.ok(alive(pid));
      const canceled = await gw.request('POST', `/v1/jobs/${held.body.run_id}/cancel`, { key });
      assert.ok(canceled.status < 300, canceled.text);
      await until('the program is gone', async () => !alive(pid), 30_000);
      await until('the job is canceled', async () => (await gw.request('GET', `/v1/jobs/${held.body.run_id}`, { key })).body.status === 'canceled');
    } catch (err) {
      (err as Error).message += `\nworker stderr: ${stderr}`;
      throw err;
    } finally {
      child.kill('SIGTERM');
    }
    assert.equal(await exited, 0, stderr);
    assert.match(stderr, /running .* for each job of inference:3d:image-to-mesh/);
  });

  it('exits 2 on bad flags', async () => {
    const cli = (args: string[]) =>
      new Promise<{ code: number | null; stderr: string }>((resolve) => {
        const child = spawn(NODE, ['api/bin/switchyard.mjs', 'worker', '--gateway', gw.url, '--token', token, ...args], { stdio: ['ignore', 'ignore', 'pipe'] });
        let stderr = '';
        child.stderr.on('data', (d) => (stderr += d));
        child.on('exit', (code) => resolve({ code, stderr }));
      });
    const cases: Array<[string[], RegExp]> = [
      [['--engine', 'command', '--kinds', 'inference:rig'], /--engine command needs --command/],
      [['--engine', 'command', '--command', "gen 'oops", '--kinds', 'inference:rig'], /--command: the command has an unclosed single quote/],
      [['--engine', 'command', '--command', 'gen', '--kinds', 'inference:rig', '--command-timeout', 'soon'], /--command-timeout must be a number of seconds/],
      [['--engine', 'command', '--command', 'gen'], /worker needs --kinds/],
      [['--engine', 'demo', '--kinds', 'inference:rig', '--command', 'gen'], /--command is for --engine command/],
    ];
    for (let i = 0; i < cases.length; i += 2) {
      const batch = cases.slice(i, i + 2);
      const results = await Promise.all(batch.map(([args]) => cli(args)));
      batch.forEach(([args, message], j) => {
        assert.equal(results[j].code, 2, `${args.join(' ')}: ${results[j].stderr}`);
        assert.match(results[j].stderr, message, args.join(' '));
      });
    }
  });
});
