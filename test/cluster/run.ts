import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { createRequire } from 'node:module';
import { REDIS_CLI, REDIS_SERVER, findProgram } from '../helpers/optional-program.js';
import { RedisCluster } from '../helpers/redis-cluster.js';
import { S3StandIn } from '../helpers/s3-stand-in.js';

/**
 * `npm run test:cluster [-- test/<name>.test.ts ...]`: the test files below (or those given) run
 * against a real Redis Cluster of 3 primaries and 3 replicas this script starts on loopback
 * (test/helpers/redis-cluster.ts), with artifacts and files in an S3 stand-in it starts too:
 * mocha runs with REDIS_CLUSTER_NODES and SY_TEST_S3_* set, which the harness hands to every
 * gateway, gateway process and client it makes (test/helpers/harness.ts), under hash-tagged
 * prefixes as the gateway makes them on a cluster. `npm test` runs it after mocha's pass.
 */
export const CLUSTER_FILES = [
  // The store contract's cluster target runs in `npm test` too (on a cluster of its own).
  'store-contract',
  'redis-cluster-gateway',
  // Jobs: submission, listing, files, attempts, deadlines, cost, credits, batches, limits.
  // Not create-and-enqueue: on a cluster the queues are on other primaries than the runs, and a
  // job's add waits for its run's create (api/composition/core.ts), so there is no intake.
  'jobs', 'jobs-listing', 'jobs-include-input', 'credits-and-idempotency', 'batches',
  'job-attempts', 'job-deadlines', 'job-cost', 'job-file-inputs', 'job-file-fetch', 'job-file-refusals', 'concurrency-limits',
  // Dispatch: leases, fleet counters, worker identities, trust, tiers, model routing, pipelines.
  'dispatch', 'lease-table', 'lease-hand-back', 'lease-handover', 'lease-retry', 'lease-scheduler-wake', 'lease-settlement-free',
  'fleet-counters', 'worker-identity', 'operator-trust', 'private-tier', 'model-routing', 'pipeline-instances',
  // Events, webhooks, files, rate limits, bots, logs, a gateway killed mid-run.
  'events-sse', 'run-status-events', 'webhooks', 'webhook-stream-events', 'files', 'rate-limit', 'auth-and-account', 'bots', 'logs',
  'crash-recovery',
  // Queue partitions (QUEUE_PARTITIONS=3), their placement on the primaries.
  'queue-partitions-dispatch', 'redis-cluster-queue-partitions',
  // The rest of the end-to-end surface: callers' sockets and clients, the OpenAI surface, tools
  // and agents, artifacts, workers and models, ranked pipelines.
  'caller-websocket', 'client-library', 'client-batches', 'client-files', 'cli-run', 'submit-gate', 'submit-caller-gone', 'job-service-resent-create',
  'run-follower-race', 'openai-surface', 'openai-gate', 'llm-availability', 'outbound-stream', 'tools', 'agent-loop', 'artifacts', 'output-files',
  'model-submission', 'admin-models', 'worker-sdk', 'worker-models', 'worker-sdk-models', 'delta-seq', 'metrics', 'model-metrics', 'engine-usage', 'bull-board', 'bot-widget',
  'run-event-hub', 'graceful-shutdown', 'private-handover', 'private-input-files', 'private-refusals', 'pipeline-lease', 'pipeline-failure', 'pipeline-backpressure',
  'pipeline-placement', 'concurrency-limits-pipelines', 'ranked-model', 'ranked-fleet', 'ranked-registration', 'ranked-waiting', 'rank-counts', 'worker-sdk-ranks-gateway',
  // The client libraries' and the Python worker SDK's own suites (two gateway processes behind a
  // balancer for the SDK's), a gateway's probes (the Redis-cut test on a cluster of its own) and
  // the console's runs list and run page in Chromium. Not the console's outputs, try and other
  // pages, nor the soak: a minute or more each of browser and engine work on top of this pass.
  'python-client', 'go-client', 'python-worker-sdk', 'health', 'console-runs', 'console-run-page',
].map((name) => `test/${name}.test.ts`);

/**
 * Tests of those files that reach neither Redis nor the store, which the one-server pass runs
 * and this one leaves out (mocha's --grep with --invert): the SDKs built and installed by pip
 * from the tree, their suites' verdict without python3, go vet.
 */
const NO_GATEWAY = ['without a usable python3', 'its sdist and an editable install build offline too', 'installed with pip `pip install ./sdk/python/worker`', 'go vet is clean'];

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
// The deployment the issue names: gateways on a Redis Cluster with S3-compatible storage, here
// s3rver standing in for S3, MinIO or R2 (test/helpers/s3-stand-in.ts); test/helpers/harness.ts
// points every test gateway at it.
const s3 = await new S3StandIn().start();
console.log(`test:cluster: a Redis Cluster of ${cluster.nodeList.length} nodes on ${cluster.setting}; S3 stand-in at ${s3.endpoint}`);
let code = 1;
try {
  const mocha = createRequire(import.meta.url).resolve('mocha/bin/mocha.js');
  const env = {
    ...process.env,
    REDIS_CLUSTER_NODES: cluster.setting,
    SY_TEST_S3_ENDPOINT: s3.endpoint,
    SY_TEST_S3_BUCKET: s3.bucket,
    AWS_ACCESS_KEY_ID: s3.accessKeyId,
    AWS_SECRET_ACCESS_KEY: s3.secretAccessKey,
  };
  const skip = NO_GATEWAY.map((title) => title.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')).join('|');
  const child = spawn(process.execPath, [mocha, '--grep', skip, '--invert', ...files], { stdio: 'inherit', env });
  const stop = () => child.kill('SIGTERM');
  process.once('SIGINT', stop).once('SIGTERM', stop);
  [code] = (await once(child, 'exit')) as [number];
} finally {
  await s3.stop();
  await cluster.stop();
}
process.exit(code ?? 1);
