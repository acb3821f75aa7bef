import { execFileSync } from 'node:child_process';
import path from 'node:path';
import type { Context, Suite } from 'mocha';
import { isExecutable as executable } from '../../sdk/engines/local/programs.js';

/**
 * System programs some tests drive for real (a browser, Prometheus, a Redis to kill). `npm test`
 * must pass on a machine with only Node and Redis, so a test whose program is missing reports
 * pending with the command that installs it; under `CI=true` (where .ci/run installs them all)
 * a missing program fails instead, so CI can never go green by skipping.
 */
export interface OptionalProgram {
  /** Executable name looked up on PATH. */
  name: string;
  /** Environment variable that may name the executable instead (e.g. PROMETHEUS_BIN). */
  env?: string;
  /** The exact command that installs it on Debian. */
  install: string;
  /** Paths tried before PATH. */
  candidates?: string[];
  /** A check beyond being executable (e.g. that an interpreter has the modules a test needs). */
  works?: (file: string) => boolean;
}

export const CHROMIUM: OptionalProgram = { name: 'chromium', env: 'CHROMIUM_BIN', install: 'apt-get install -y chromium' };
export const PROMETHEUS: OptionalProgram = { name: 'prometheus', env: 'PROMETHEUS_BIN', install: 'apt-get install -y --no-install-recommends prometheus' };
export const PROMTOOL: OptionalProgram = { name: 'promtool', env: 'PROMTOOL_BIN', install: 'apt-get install -y --no-install-recommends prometheus' };
export const REDIS_SERVER: OptionalProgram = { name: 'redis-server', env: 'REDIS_SERVER_BIN', install: 'apt-get install -y redis-server' };
/** Debian's redis-tools: `redis-cli --cluster create` joins the nodes of test/helpers/redis-cluster.ts. */
export const REDIS_CLI: OptionalProgram = { name: 'redis-cli', env: 'REDIS_CLI_BIN', install: 'apt-get install -y redis-tools' };
/** Debian's pocketsphinx (0.8) installs this program; the en-us model is its own package. */
export const POCKETSPHINX: OptionalProgram = { name: 'pocketsphinx_continuous', env: 'POCKETSPHINX_BIN', install: 'apt-get install -y pocketsphinx pocketsphinx-en-us' };
/** The README's snippets fetch tokens with it. */
export const CURL: OptionalProgram = { name: 'curl', env: 'CURL_BIN', install: 'apt-get install -y curl' };
export const ESPEAK_NG: OptionalProgram = { name: 'espeak-ng', env: 'ESPEAK_NG_BIN', install: 'apt-get install -y espeak-ng' };
/**
 * A python3 that can import websockets and pytest (the tests of the Python worker SDK,
 * sdk/python/worker/, and of the Python client, sdk/python/).
 * Debian's packages install them for /usr/bin/python3 only, so that one is tried before PATH's.
 */
export const PYTHON: OptionalProgram = {
  name: 'python3',
  env: 'PYTHON_BIN',
  install: 'apt-get install -y python3-websockets python3-pytest',
  candidates: ['/usr/bin/python3'],
  works: (file) => {
    try {
      execFileSync(file, ['-c', 'import websockets, pytest'], { stdio: 'ignore', timeout: 20_000 });
      return true;
    } catch {
      return false;
    }
  },
};
/**
 * A python3 that can make a venv with pip (Debian splits venv and ensurepip into python3-venv),
 * for the checks that `pip install ./sdk/python` works offline in a fresh venv. Building the
 * package needs nothing more: its build backend is in the tree (sdk/python/worker/build_backend/).
 */
export const PYTHON_VENV: OptionalProgram = {
  name: 'python3',
  env: 'PYTHON_BIN',
  install: 'apt-get install -y python3-venv',
  candidates: ['/usr/bin/python3'],
  works: (file) => {
    try {
      execFileSync(file, ['-c', 'import venv, ensurepip'], { stdio: 'ignore', timeout: 20_000 });
      return true;
    } catch {
      return false;
    }
  },
};
/**
 * A python3 that can make a venv with pip and already has websockets (Debian's), for the check
 * that `pip install ./sdk/python/worker` works offline in a venv that sees the system's packages.
 */
export const PYTHON_WORKER_VENV: OptionalProgram = {
  name: 'python3',
  env: 'PYTHON_BIN',
  install: 'apt-get install -y python3-venv python3-websockets',
  candidates: ['/usr/bin/python3'],
  works: (file) => {
    try {
      execFileSync(file, ['-c', 'import venv, ensurepip, websockets'], { stdio: 'ignore', timeout: 20_000 });
      return true;
    } catch {
      return false;
    }
  },
};
export const FFMPEG: OptionalProgram = { name: 'ffmpeg', env: 'FFMPEG_BIN', install: 'apt-get install -y ffmpeg' };
export const FFPROBE: OptionalProgram = { name: 'ffprobe', env: 'FFPROBE_BIN', install: 'apt-get install -y ffmpeg' };
/** The example script of docs/engines.md ("command") is Python. */
export const PYTHON3: OptionalProgram = { name: 'python3', env: 'PYTHON3_BIN', install: 'apt-get install -y python3' };
/** Debian's Go toolchain (1.19 on bookworm), for the Go client's own tests (sdk/go). */
export const GO: OptionalProgram = { name: 'go', env: 'GO_BIN', install: 'apt-get install -y golang-go' };

/** The program's path (its env variable, else the first match on PATH), or undefined. */
export function findProgram(program: OptionalProgram, env: NodeJS.ProcessEnv = process.env): string | undefined {
  const usable = (file: string) => executable(file) && (!program.works || program.works(file));
  const named = program.env ? env[program.env] : undefined;
  if (named) return usable(named) ? named : undefined;
  for (const file of program.candidates ?? []) if (usable(file)) return file;
  for (const dir of (env.PATH ?? '').split(path.delimiter)) {
    if (dir && usable(path.join(dir, program.name))) return path.join(dir, program.name);
  }
  return undefined;
}

function markPending(suite: Suite, note: string): void {
  for (const test of suite.tests) test.title += ` (pending: ${note})`;
  for (const child of suite.suites) markPending(child, note);
}

/**
 * For a `before` hook (called with mocha's `this`): the program's path, or, when it is missing,
 * every test of the suite pending with the install command (outside CI) or a failure (CI=true).
 */
export function requireProgram(ctx: Context, program: OptionalProgram): string {
  const found = findProgram(program);
  if (found) return found;
  const note = `${program.name} is not installed; ${program.install}`;
  if (process.env.CI === 'true') throw new Error(`CI=true requires ${note}`);
  markPending(ctx.test!.parent!, note);
  ctx.skip();
}
