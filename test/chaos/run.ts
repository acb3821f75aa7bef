// `npm run chaos -- [--scenario a,b | --mixed] [--sabotage name|all] [--short] [--cluster]`: see docs/reliability.md, "Chaos".
import { execFileSync } from 'node:child_process';
import { parseArgs } from 'node:util';
import { runChaos } from './chaos-run.js';
import { formatTable, type ChaosVerdict } from './invariants.js';
import { SABOTAGES, sabotageNamed } from './sabotage.js';
import { SCENARIOS, scenarioNamed, unavailableReason } from './scenarios.js';

const { values } = parseArgs({
  options: {
    scenario: { type: 'string' },
    mixed: { type: 'boolean', default: false },
    sabotage: { type: 'string' },
    short: { type: 'boolean', default: false },
    list: { type: 'boolean', default: false },
    cluster: { type: 'boolean', default: false },
  },
});

if (values.list) {
  for (const s of SCENARIOS) console.log(`${s.name} (${(s.on ?? ['server']).join(', ')}): ${s.promise}`);
  for (const s of SABOTAGES) console.log(`sabotage ${s.name} (in ${s.scenario}): must show in ${s.caughtBy}`);
  process.exit(0);
}

const redisBin = process.env.REDIS_SERVER_BIN ?? execFileSync('sh', ['-c', 'command -v redis-server']).toString().trim();
// --cluster: a Redis Cluster of 3 primaries and 3 replicas with S3 storage, and the scenarios made for it.
const target = values.cluster ? ('cluster' as const) : ('server' as const);
const cliBin = values.cluster ? execFileSync('sh', ['-c', 'command -v redis-cli']).toString().trim() : undefined;
const onTarget = (name: string) => (scenarioNamed(name).on ?? ['server']).includes(target);
const phases = values.short ? { warmupMs: 2000, afterMs: 2000 } : { warmupMs: 5000, afterMs: 5000 };
const log = (line: string) => console.error(`[chaos ${new Date().toISOString().slice(11, 19)}] ${line}`);
const names = (values.scenario ? values.scenario.split(',') : SCENARIOS.map((s) => s.name).filter(onTarget)).filter((name) => {
  const why = !onTarget(name) ? `it is not made for ${values.cluster ? 'a Redis Cluster' : 'one Redis server'}` : unavailableReason(scenarioNamed(name));
  if (why) log(`${name}: not run: ${why}`);
  return !why;
});
const rows: ChaosVerdict[] = [];
let failed = false;

if (values.sabotage) {
  // Each planted fault must be caught: a verdict with no violation in its column is a miss.
  const list = values.sabotage === 'all' ? SABOTAGES : values.sabotage.split(',').map(sabotageNamed);
  for (const sabotage of list) {
    const verdict = await runChaos({ redisBin, target, cliBin, scenarios: [scenarioNamed(sabotage.scenario)], sabotage, log, ...phases });
    rows.push(verdict);
    const caught = verdict[sabotage.caughtBy] > 0;
    log(`sabotage ${sabotage.name}: ${caught ? 'caught' : 'NOT CAUGHT'} (${verdict.violations.length} violations${verdict.violations[0] ? `, first: ${verdict.violations[0]}` : ''})`);
    if (!caught) failed = true;
  }
} else if (values.mixed) {
  const verdict = await runChaos({ redisBin, target, cliBin, scenarios: names.map(scenarioNamed), label: 'mixed', log, ...phases });
  rows.push(verdict);
} else {
  for (const name of names) rows.push(await runChaos({ redisBin, target, cliBin, scenarios: [scenarioNamed(name)], log, ...phases }));
}

console.log(formatTable(rows));
if (!values.sabotage) {
  for (const r of rows) for (const v of r.violations) console.log(`${r.scenario}: ${v}`);
  failed = rows.some((r) => r.violations.length > 0);
}
process.exit(failed ? 1 : 0);
