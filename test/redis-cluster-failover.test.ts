import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { runCliWorker } from './helpers/cli-worker.js';
import { GatewayProcess } from './helpers/gateway-process.js';
import { ADMIN_TOKEN, until } from './helpers/harness.js';
import { REDIS_CLI, REDIS_SERVER, requireProgram } from './helpers/optional-program.js';
import { RedisCluster } from './helpers/redis-cluster.js';

/**
 * The failover a Redis Cluster is for: the primary holding the gateway's slot (phase 1: all of
 * its keys) is SIGKILLed under a running gateway; its replica takes over and the same gateway
 * process, without a restart, goes on taking and completing jobs. A cluster of its own (the
 * shared one serves other test files, which a killed primary would disturb).
 */
describe('gateway on a Redis Cluster: its primary fails over', function () {
  this.timeout(90_000);
  const prefix = `sytest-cluster-fo-${randomBytes(4).toString('hex')}`;
  let cluster: RedisCluster | undefined;
  let dir: string;
  let gw: GatewayProcess | undefined;

  before(async function () {
    cluster = await RedisCluster.start({ server: requireProgram(this, REDIS_SERVER), cli: requireProgram(this, REDIS_CLI) });
    dir = mkdtempSync(path.join(os.tmpdir(), 'sy-cluster-fo-'));
    // The cluster's nodes time out after 2 s (test/helpers/redis-cluster.ts), so a failover takes a few seconds.
    gw = await new GatewayProcess({ REDIS_CLUSTER_NODES: cluster.setting, REDIS_PREFIX: prefix, DATA_DIR: dir }).start();
  });

  after(async () => {
    await gw?.kill();
    await cluster?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  const call = (method: string, route: string, token: string, body?: unknown) => gw!.call(method, route, token, body);

  /** Submits until accepted (a 503 while Redis fails over is the documented answer to retry), then waits for success. */
  async function completes(key: string, what: string): Promise<string> {
    const runId = await until(`${what} accepted`, async () => {
      const res = await call('POST', '/v1/jobs', key, { kind: 'inference:image:generate', input: { prompt: what } });
      assert.ok(res.status === 202 || res.status === 503, `${res.status} ${JSON.stringify(res.body)}`);
      return res.status === 202 && (res.body.run_id as string);
    }, 30_000);
    try {
      await until(`${what} to succeed`, async () => (await call('GET', `/v1/jobs/${runId}`, key)).body?.status === 'succeeded', 30_000);
    } catch (err) {
      // What the gateway warned of meanwhile says where the run stopped.
      const warned = gw!.lines.filter((l) => (l.level ?? 0) >= 40).map((l) => `${l.msg} ${l.err?.message ?? ''}`);
      throw new Error(`${(err as Error).message}; the gateway warned: ${warned.slice(-15).join(' | ')}`);
    }
    return runId;
  }

  it("goes on completing jobs after the primary of its slot is killed and its replica promoted", async () => {
    const account = await call('POST', '/v1/admin/accounts', ADMIN_TOKEN, { name: 'failover', credits: 1000 });
    assert.equal(account.status, 201, JSON.stringify(account.body));
    const key: string = account.body.api_key;
    const operator = await call('POST', '/v1/admin/operators', ADMIN_TOKEN, { name: 'failover-op', trust: 'open' });
    const args = ['--engine', 'demo', '--demo-delay-ms', '20', '--kinds', 'inference:image:generate'];
    const { code, stderr } = await runCliWorker({ gateway: gw!.url, token: operator.body.worker_token, env: process.env }, args, async () => {
      const before = await completes(key, 'before the failover');
      const primary = await cluster!.primaryOf(`{${prefix}}`);
      await cluster!.kill(primary);
      const survivor = cluster!.nodes.find((n) => n.port !== primary)!.port;
      await cluster!.until(async () => (await cluster!.liveOk()) && (await cluster!.primaryOf(`{${prefix}}`, survivor)) !== primary, 'a replica promoted in the killed primary\'s place');
      const after = await completes(key, 'after the failover');
      // Its sharded subscriptions (docs/architecture.md, "Redis Cluster") followed the slot: the
      // dispatcher's channels are shard channels of the promoted replica, made again by ioredis.
      const promoted = await cluster!.primaryOf(`{${prefix}}`, survivor);
      await cluster!.until(async () => {
        const held = (await cluster!.ask(promoted, 'PUBSUB', 'SHARDCHANNELS', `{${prefix}}:chan:*`)).split('\n');
        return ['queued', 'cancel', 'workers', 'operators'].every((c) => held.includes(`{${prefix}}:chan:${c}`));
      }, "the gateway's subscriptions on the promoted primary");
      // The run from before the failover is still there: the replica had it.
      assert.equal((await call('GET', `/v1/jobs/${before}`, key)).body.status, 'succeeded');
      assert.notEqual(after, before);
    });
    assert.equal(code, 0, stderr);
    assert.equal(gw!.child.exitCode, null, 'the gateway process lived through it');
  });
});
