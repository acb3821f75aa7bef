import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { createRequire } from 'node:module';
import { REDIS_CLI, REDIS_SERVER, findProgram } from '../helpers/optional-program.js';
import { RedisCluster } from '../helpers/redis-cluster.js';

/**
 * `npm run test:cluster [-- test/x.test.ts ...]`: the test files below (or those given) run
 * against a real Redis Cluster of 3 primaries and 3 replicas this script starts on loopback
 * (test/helpers/redis-cluster.ts): mocha runs with REDIS_CLUSTER_NODES set, which the harness
 * hands to every gateway, gateway process and client it makes (test/helpers/harness.ts), under
 * hash-tagged prefixes as the gateway makes them on a cluster. .ci/run runs it after `npm test`.
 */
export const CLUSTER_FILES = [
  // The store contract's cluster target runs in `npm test` too (on a cluster of its own).
  'test/store-contract.test.ts',
  'test/redis-cluster-gateway.test.ts',
  'test/jobs.test.ts',
  'test/dispatch.test.ts',
  'test/events-sse.test.ts',
  'test/run-status-events.test.ts',
  'test/webhooks.test.ts',
  'test/webhook-stream-events.test.ts',
  'test/files.test.ts',
  'test/crash-recovery.test.ts',
];

const files = process.argv.slice(2).length > 0 ? process.argv.slice(2) : CLUSTER_FILES;
const server = findProgram(REDIS_SERVER);
const cli = findProgram(REDIS_CLI);
if (!server || !cli) {
  const missing = [!server && REDIS_SERVER, !cli && REDIS_CLI].filter((p) => p !== false);
  const note = missing.map((p) => `${p.name} is not installed; ${p.install}`).join('; ');
  // As every test of a system program: skipped with the command outside CI, a failure in it.
  console.error(`test:cluster: ${note}`);
  process.exit(process.env.CI === 'true' ? 1 : 0);
}

const cluster = await RedisCluster.start({ server, cli });
console.log(`test:cluster: a Redis Cluster of ${cluster.nodeList.length} nodes on ${cluster.setting}`);
let code = 1;
try {
  const mocha = createRequire(import.meta.url).resolve('mocha/bin/mocha.js');
  const child = spawn(process.execPath, [mocha, ...files], { stdio: 'inherit', env: { ...process.env, REDIS_CLUSTER_NODES: cluster.setting } });
  const stop = () => child.kill('SIGTERM');
  process.once('SIGINT', stop).once('SIGTERM', stop);
  [code] = (await once(child, 'exit')) as [number];
} finally {
  await cluster.stop();
}
process.exit(code ?? 1);
