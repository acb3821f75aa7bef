import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { SwitchyardWorker } from '../sdk/worker/index.js';
import { silentLogger } from '../sdk/worker/logger.js';
import { GatewayProcess } from './helpers/gateway-process.js';
import { ADMIN_TOKEN, until } from './helpers/harness.js';
import { REDIS_CLI, REDIS_SERVER, requireProgram } from './helpers/optional-program.js';
import { RedisCluster } from './helpers/redis-cluster.js';

const LLM = 'inference:llm:text-generate';

/**
 * REDIS_WAIT_REPLICAS=1 on a Redis Cluster of 3 primaries and 3 replicas (a cluster of its own:
 * a killed primary would disturb the shared one's other files). Callers submit without pause
 * while the primary holding the gateway's keys is SIGKILLed; its replica takes over and the
 * gateway follows. Every run answered 202 must be there after the failover and succeed, and
 * no run's end may be acknowledged to the worker twice (a settle the failover forgot would
 * have run it again). A 503 while the cluster fails over is the documented answer to retry.
 */
describe('REDIS_WAIT_REPLICAS=1: a Redis Cluster primary killed under load', function () {
  this.timeout(180_000);
  const prefix = `sytest-wait-${randomBytes(4).toString('hex')}`;
  let cluster: RedisCluster | undefined;
  let dir: string;
  let gw: GatewayProcess | undefined;
  let worker: SwitchyardWorker | undefined;

  before(async function () {
    cluster = await RedisCluster.start({ server: requireProgram(this, REDIS_SERVER), cli: requireProgram(this, REDIS_CLI) });
    dir = mkdtempSync(path.join(os.tmpdir(), 'sy-wait-replicas-'));
    // After the failover the promoted replica has no replica of its own: each WAIT then times out
    // (a shortfall), and the run is answered once the store shows it is there. A lease the
    // failover took is recovered when its lock lapses: 10 s here, not the default 30 s (CI once
    // had a run still unfinished 60 s after the failover with the default).
    gw = await new GatewayProcess({ REDIS_CLUSTER_NODES: cluster.setting, REDIS_PREFIX: prefix, DATA_DIR: dir, REDIS_WAIT_REPLICAS: '1', REDIS_WAIT_TIMEOUT_MS: '300', LEASE_TTL_MS: '10000', HEARTBEAT_MS: '2000' }).start();
  });

  after(async () => {
    await worker?.stop({ timeoutMs: 0 });
    await gw?.kill();
    await cluster?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  const call = (method: string, route: string, token: string, body?: unknown) => gw!.call(method, route, token, body);

  it('loses no run it accepted and acknowledges no run\'s end twice', async () => {
    const account = await call('POST', '/v1/admin/accounts', ADMIN_TOKEN, { name: 'wait', credits: 1_000_000 });
    assert.equal(account.status, 201, JSON.stringify(account.body));
    const key: string = account.body.api_key;
    const operator = await call('POST', '/v1/admin/operators', ADMIN_TOKEN, { name: 'wait-op', trust: 'open' });
    assert.equal(operator.status, 201, JSON.stringify(operator.body));

    // The worker's view: how many times the gateway acknowledged each run's end.
    const acked = new Map<string, number>();
    worker = new SwitchyardWorker({
      gateway: gw!.url,
      token: operator.body.worker_token,
      kinds: [LLM],
      slots: 8,
      logger: silentLogger,
      handler: async (_kind, input) => ({ artifacts: [], extra: { text: String(input.prompt) }, usage: { input_tokens: 1, output_tokens: 1 } }),
    });
    worker.on('completed', (lease) => acked.set(lease.run_id, (acked.get(lease.run_id) ?? 0) + 1));
    await worker.start();

    const accepted: string[] = [];
    const statuses = new Map<number, number>();
    let submitting = true;
    const submitter = async (n: number) => {
      for (let i = 0; submitting; i++) {
        const res = await call('POST', '/v1/jobs', key, { kind: LLM, input: { prompt: `s${n}-${i}` } });
        statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
        assert.ok(res.status === 202 || res.status === 503, `${res.status} ${JSON.stringify(res.body)}`);
        if (res.status === 202) accepted.push(res.body.run_id);
      }
    };
    const load = Promise.all([1, 2, 3, 4].map(submitter));

    await until('runs accepted before the kill', async () => accepted.length >= 40, 60_000);
    const primary = await cluster!.primaryOf(`{${prefix}}`);
    // The accepts waited on the cluster's primary (WAIT is keyless: the probe takes it there).
    assert.ok(/cmdstat_wait:calls=[1-9]/.test(await cluster!.ask(primary, 'INFO', 'commandstats')), 'WAIT ran on the primary of the slot');
    const atKill = accepted.length;
    await cluster!.kill(primary);
    const survivor = cluster!.nodes.find((n) => n.port !== primary)!.port;
    await cluster!.until(async () => (await cluster!.liveOk()) && (await cluster!.primaryOf(`{${prefix}}`, survivor)) !== primary, "a replica promoted in the killed primary's place", 60_000);
    await until('runs accepted after the failover', async () => accepted.length >= atKill + 20, 90_000);
    submitting = false;
    await load;

    // Every accepted run is there and ends succeeded, its end acknowledged to the worker once.
    for (const runId of accepted) {
      const run = await until(`${runId} to succeed`, async () => {
        const res = await call('GET', `/v1/jobs/${runId}`, key);
        assert.ok(res.status === 200 || res.status === 503, `${runId}: ${res.status} ${JSON.stringify(res.body)}`);
        return res.status === 200 && res.body.terminal && res.body;
      }, 90_000);
      assert.equal(run.status, 'succeeded', `${runId}: ${JSON.stringify(run.error)}`);
    }
    const twice = [...acked].filter(([, n]) => n > 1);
    assert.deepEqual(twice, [], 'no run completed twice');
    assert.equal(new Set(accepted).size, accepted.length);
    assert.equal(gw!.child.exitCode, null, 'the gateway process lived through it');
    if (process.env.SY_TEST_VERBOSE) console.log({ accepted: accepted.length, atKill, statuses: Object.fromEntries(statuses) });
  });
});
