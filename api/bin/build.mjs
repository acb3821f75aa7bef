#!/usr/bin/env node
// The build (`npm run build`; `npm install` runs it through `prepare`): the TypeScript sources
// compiled by tsc into plain JavaScript, so the gateway, the CLI and the SDKs run on `node` alone.
//
//   dist/                 the gateway and the CLI (tsconfig.build.json): api, queues, dispatch,
//                         models and sdk as JavaScript, plus the files they read beside their
//                         modules at run time (the bot pages' browser scripts)
//   sdk/client/dist/      the @switchyard/client package (sdk/client/tsconfig.json): JS + .d.ts
//   sdk/worker/dist/      the @switchyard/worker package (sdk/worker/tsconfig.json): JS + .d.ts
//   dist/console/         the web console (api/console/, type-checked by its own tsconfig), one
//                         script and one stylesheet bundled by esbuild, its icon, and the 3D
//                         viewer it loads on demand (@google/model-viewer's self-contained build)
//
// `--if-stale` builds only when a source is newer than the last build (the stamp file), which
// is how `npm run dev` and the tests (test/helpers/fresh-build.ts) make sure they never run an
// old build; `--warn-type-errors` reports type errors without failing when tsc still wrote the
// JavaScript (as tsx ran the sources whatever their types). Plain Node, no dependency but
// typescript's tsc.
import { spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, readdirSync, rmSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
export const STAMP = path.join(ROOT, 'dist', '.build-stamp');

/** The tsc projects, in build order (the console's only type-checks: esbuild writes its bundle). */
const PROJECTS = ['tsconfig.build.json', 'sdk/client/tsconfig.json', 'sdk/worker/tsconfig.json', 'api/console/tsconfig.json'];
/** The console: its entry point, and the files copied beside its bundle (dist/console/<to> from <from>). */
const CONSOLE_ENTRY = 'api/console/main.tsx';
const CONSOLE_FILES = [
  { from: 'api/console/icon.svg', to: 'icon.svg' },
  { from: 'node_modules/@google/model-viewer/dist/model-viewer.min.js', to: 'vendor/model-viewer.min.js' },
];
/** Folders of sources the build reads (their dist/, node_modules and the other languages' SDKs aside). */
const SOURCE_DIRS = ['api', 'queues', 'dispatch', 'models', 'sdk'];
const SKIP = new Set(['dist', 'node_modules', 'go', 'python', '__pycache__']);
/** Files other than modules that modules read beside themselves at run time: copied into dist/. */
const ASSETS = ['api/http/bot-pages/chat-core.js', 'api/http/bot-pages/embed-boot.js', 'api/http/bot-pages/page-boot.js'];

/** Every input of the build: the sources, the assets, the tsconfigs, the sdk package.json files, this script. */
function inputs() {
  const walk = (dir) =>
    readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
      const p = path.join(dir, e.name);
      // A folder counts too: its time changes when a file in it is added, removed or renamed.
      if (e.isDirectory()) return SKIP.has(e.name) ? [] : [p, ...walk(p)];
      return /\.(ts|tsx|js|mjs|json|css|svg)$/.test(e.name) ? [p] : [];
    });
  return [
    ...SOURCE_DIRS.flatMap((d) => [path.join(ROOT, d), ...walk(path.join(ROOT, d))]),
    ...PROJECTS.map((p) => path.join(ROOT, p)),
    path.join(ROOT, 'tsconfig.json'),
    path.join(ROOT, 'package.json'),
    fileURLToPath(import.meta.url),
  ];
}

/** True when there is no build yet or an input changed since the last one. */
export function isStale() {
  if (!existsSync(STAMP)) return true;
  const built = statSync(STAMP).mtimeMs;
  return inputs().some((f) => existsSync(f) && statSync(f).mtimeMs > built);
}

/** The SDK packages' output folders: emptied before each build, so a tarball never ships a file its sources no longer make. */
const PACKAGE_DISTS = ['sdk/client/dist', 'sdk/worker/dist'];

/**
 * Deletes what dist/ holds without a source any more (a module renamed or removed): dist/ is
 * rebuilt in place rather than emptied, so a gateway running from it keeps its files meanwhile.
 */
function pruneOrphans(dir = path.join(ROOT, 'dist')) {
  // dist/console/ is the console's bundle, written whole by each build: no file of it has a source of its name.
  if (!existsSync(dir) || dir === path.join(ROOT, 'dist', 'console')) return;
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) {
      pruneOrphans(p);
      if (readdirSync(p).length === 0) rmSync(p, { recursive: true });
      continue;
    }
    const source = path.join(ROOT, path.relative(path.join(ROOT, 'dist'), p));
    const stem = source.replace(/(\.d)?\.(js|ts)$/, '');
    if (/\.(js|d\.ts)$/.test(e.name) && !existsSync(`${stem}.ts`) && !existsSync(source)) rmSync(p);
  }
}

/**
 * Runs every tsc project and copies the assets; throws with tsc's output on an error. With
 * `typeErrors: 'warn'` (the tests and `npm run dev`, which ran the sources through tsx before,
 * type errors or not) type errors are printed and the build goes on when tsc still wrote its
 * output (exit status 2); `npm install` and `npm run build` fail on them.
 */
export function build({ quiet = false, typeErrors = 'fail' } = {}) {
  const started = performance.now();
  const startedAt = new Date();
  // Their contents, not the folders: removing sdk/client/dist itself would date sdk/client, an input, after the build.
  for (const dir of PACKAGE_DISTS.map((d) => path.join(ROOT, d)).filter((d) => existsSync(d))) {
    for (const name of readdirSync(dir)) rmSync(path.join(dir, name), { recursive: true, force: true });
  }
  pruneOrphans();
  // typescript's own entry point (TypeScript 7: the native compiler behind a small launcher).
  const tsc = path.join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc');
  if (!existsSync(tsc)) throw new Error(`${tsc} is missing: the build needs the devDependencies (npm install without --omit=dev)`);
  for (const project of PROJECTS) {
    const r = spawnSync(process.execPath, [tsc, '-p', path.join(ROOT, project)], { cwd: ROOT, encoding: 'utf8' });
    if (r.status === 2 && typeErrors === 'warn') console.error(`switchyard: type errors in tsc -p ${project} (its output was still written):\n${r.stdout}${r.stderr}`);
    else if (r.status !== 0) throw new Error(`tsc -p ${project} failed:\n${r.stdout}${r.stderr}`);
  }
  for (const asset of ASSETS) {
    const to = path.join(ROOT, 'dist', asset);
    mkdirSync(path.dirname(to), { recursive: true });
    copyFileSync(path.join(ROOT, asset), to);
  }
  buildConsole();
  // Dated when the build started: a source saved while tsc ran is newer, so the next check rebuilds.
  writeFileSync(STAMP, `${new Date().toISOString()}\n`);
  utimesSync(STAMP, startedAt, startedAt);
  if (!quiet) console.log(`switchyard: built dist/, sdk/client/dist/ and sdk/worker/dist/ in ${((performance.now() - started) / 1000).toFixed(1)} s`);
}

/**
 * The console's bundle: esbuild (a devDependency, like typescript) reads the TSX and CSS and
 * writes one minified ES module and one stylesheet; no file of it is fetched from anywhere at
 * run time. The viewer is copied as its package ships it, and loaded only by pages that show
 * a mesh.
 */
function buildConsole() {
  const out = path.join(ROOT, 'dist', 'console');
  const esbuild = createRequire(import.meta.url)('esbuild');
  esbuild.buildSync({
    entryPoints: { app: path.join(ROOT, CONSOLE_ENTRY) },
    outdir: out,
    bundle: true,
    format: 'esm',
    platform: 'browser',
    target: ['chrome109', 'firefox115', 'safari16'],
    minify: true,
    legalComments: 'linked',
    jsx: 'automatic',
    jsxImportSource: 'preact',
    tsconfig: path.join(ROOT, 'api/console/tsconfig.json'),
    logLevel: 'error',
  });
  for (const { from, to } of CONSOLE_FILES) {
    mkdirSync(path.dirname(path.join(out, to)), { recursive: true });
    copyFileSync(path.join(ROOT, from), path.join(out, to));
  }
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  try {
    if (!process.argv.includes('--if-stale') || isStale()) build({ typeErrors: process.argv.includes('--warn-type-errors') ? 'warn' : 'fail' });
  } catch (err) {
    console.error(`switchyard: build failed: ${err.message}`);
    process.exit(1);
  }
}
