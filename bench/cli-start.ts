import { spawnSync } from 'node:child_process';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { build, isStale } from '../api/bin/build.mjs';
import { fmt, table } from './lib/report.js';

/**
 * How long the `switchyard` command takes to answer `--help`, from the compiled build (what
 * `npx switchyard` and `npm start` run), beside references measured in the same run: Node doing
 * nothing (`node -e 0`, the floor), npm exec running a program of the PATH (`npx node -e 0`, its
 * floor) and the TypeScript sources run through tsx's loader (the way the command ran before it
 * was compiled). The commands are run round-robin, so a busy moment of
 * the machine falls on every one alike; each figure is the median (and p90) of its wall times.
 * Also times the build itself (api/bin/build.mjs: the three tsc projects and the asset copy).
 * Goal (docs/benchmarks.md): `npx switchyard --help` under 500 ms.
 */
const GOAL_MS = 500;
const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

interface Phase {
  name: string;
  command: string[];
  /** Checked in the output of every run, so a broken setup cannot report a fast failure. */
  expect?: RegExp;
}

const PHASES: Phase[] = [
  { name: 'node -e 0 (floor)', command: [process.execPath, '-e', '0'] },
  { name: 'node api/bin/switchyard.mjs --help', command: [process.execPath, 'api/bin/switchyard.mjs', '--help'], expect: /^switchyard <command>/ },
  { name: 'npx switchyard --help', command: ['npx', 'switchyard', '--help'], expect: /^switchyard <command>/ },
  // npm exec's fixed cost: a command it finds on the PATH, without the local-package lookup and
  // the npx-cache tree it loads for a project's own bin.
  { name: 'npx node -e 0 (npm exec floor)', command: ['npx', 'node', '-e', '0'] },
  { name: 'node --import tsx api/main/cli.ts --help (sources, before)', command: [process.execPath, '--import', 'tsx', 'api/main/cli.ts', '--help'], expect: /^switchyard <command>/ },
];

function parseOptions(args: string[]): { runs: number; builds: number; json: boolean } {
  const o = { runs: 15, builds: 2, json: false };
  for (let i = 0; i < args.length; i++) {
    const a = args[i];
    if (a === '--json') o.json = true;
    else if (a === '--runs' || a === '--builds') {
      const n = Number(args[++i]);
      if (!Number.isInteger(n) || n < (a === '--runs' ? 1 : 0)) throw new Error(`${a} takes a whole number`);
      o[a === '--runs' ? 'runs' : 'builds'] = n;
    } else throw new Error(`unknown option ${a} (--runs N, --builds N, --json)`);
  }
  return o;
}

const quantile = (sorted: number[], q: number) => sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))];

function timeOnce(phase: Phase): number {
  const started = performance.now();
  const r = spawnSync(phase.command[0], phase.command.slice(1), { cwd: ROOT, encoding: 'utf8', env: { ...process.env, npm_config_update_notifier: 'false' } });
  const ms = performance.now() - started;
  if (r.status !== 0 || (phase.expect && !phase.expect.test(r.stdout))) throw new Error(`${phase.command.join(' ')} failed (exit ${r.status}): ${r.stderr || r.stdout}`);
  return ms;
}

export default async function cliStart(args: string[]): Promise<number> {
  let o: ReturnType<typeof parseOptions>;
  try {
    o = parseOptions(args);
  } catch (err) {
    console.error(`cli-start: ${(err as Error).message}`);
    return 2;
  }
  const log = (msg: string) => o.json || console.error(msg);
  if (isStale()) {
    log('cli-start: the build is stale; building first');
    build({ quiet: true });
  }
  const buildMs: number[] = [];
  for (let i = 0; i < o.builds; i++) {
    log(`build ${i + 1}/${o.builds}`);
    const started = performance.now();
    build({ quiet: true });
    buildMs.push(performance.now() - started);
  }
  // One unmeasured round: the OS's file cache and tsx's compile cache (in the temp dir) warm up.
  for (const phase of PHASES) timeOnce(phase);
  const times = PHASES.map(() => [] as number[]);
  for (let run = 0; run < o.runs; run++) {
    log(`round ${run + 1}/${o.runs}`);
    PHASES.forEach((phase, i) => times[i].push(timeOnce(phase)));
  }
  const results = PHASES.map((phase, i) => {
    const sorted = [...times[i]].sort((a, b) => a - b);
    return { name: phase.name, command: phase.command.join(' ').replace(process.execPath, 'node'), medianMs: quantile(sorted, 0.5), p90Ms: quantile(sorted, 0.9), minMs: sorted[0], maxMs: sorted.at(-1)! };
  });
  const npx = results[2];
  const goal = { npxHelpMedianUnderMs: GOAL_MS, met: npx.medianMs < GOAL_MS };
  const machine = { cpus: os.availableParallelism(), cpuModel: os.cpus()[0]?.model.trim() ?? 'unknown', node: process.version, loadavg: os.loadavg().map((l) => Number(l.toFixed(2))) };
  const buildSorted = [...buildMs].sort((a, b) => a - b);
  const buildFigure = buildMs.length ? { runs: buildMs.length, medianMs: quantile(buildSorted, 0.5), minMs: buildSorted[0], maxMs: buildSorted.at(-1)! } : undefined;
  if (o.json) {
    console.log(JSON.stringify({ benchmark: 'cli-start', machine, options: o, build: buildFigure, phases: results, goal }, null, 2));
    return 0;
  }
  console.log(`\nmachine: ${machine.cpus} cores (${machine.cpuModel}), Node ${machine.node}, load average ${machine.loadavg.join(' ')}`);
  if (buildFigure) console.log(`build (api/bin/build.mjs, ${buildFigure.runs} runs): median ${fmt(buildFigure.medianMs)} ms, min ${fmt(buildFigure.minMs)} ms, max ${fmt(buildFigure.maxMs)} ms\n`);
  console.log(`wall time of ${o.runs} runs each, round-robin:`);
  console.log(table(['command', 'median ms', 'p90 ms', 'min ms', 'max ms'], results.map((r) => [r.name, fmt(r.medianMs), fmt(r.p90Ms), fmt(r.minMs), fmt(r.maxMs)])));
  console.log(`\nnpm exec's own share of npx switchyard: ${fmt(npx.medianMs - results[1].medianMs)} ms (median npx minus median node bin); npx's floor: ${fmt(results[3].medianMs - results[0].medianMs)} ms`);
  console.log(`goal (npx switchyard --help < ${GOAL_MS} ms, median): ${goal.met ? 'met' : 'NOT met'}`);
  return 0;
}
