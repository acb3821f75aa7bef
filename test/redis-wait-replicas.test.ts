import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { RedisKeys } from '../models/redis/keys.js';
import { queueName } from '../queues/queue-names.js';
import { SwitchyardWorker } from '../sdk/worker/index.js';
import { silentLogger } from '../sdk/worker/logger.js';
import { GatewayProcess } from './helpers/gateway-process.js';
import { ADMIN_TOKEN, until } from './helpers/harness.js';
import { REDIS_CLI, REDIS_SERVER, requireProgram } from './helpers/optional-program.js';
import { RedisCluster } from './helpers/redis-cluster.js';

const LLM = 'inference:llm:text-generate';

/**
 * An account whose runs (its group's slot, models/redis/keys.ts) are on another primary than
 * the job queue's, so a case that kills one of the two kills only that one.
 */
async function accountApartFromQueue(gw: GatewayProcess, cluster: RedisCluster, prefix: string, credits: number): Promise<{ id: string; key: string; runsKey: string }> {
  const queueKey = new RedisKeys(`{${prefix}}`).queuePrefixOf(queueName(LLM, 'open'));
  for (let i = 0; ; i++) {
    const res = await gw.call('POST', '/v1/admin/accounts', ADMIN_TOKEN, { name: `wait-${i}`, credits });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    const runsKey = new RedisKeys(`{${prefix}}`).account(res.body.account.id);
    if ((await cluster.primaryOf(runsKey)) !== (await cluster.primaryOf(queueKey))) return { id: res.body.account.id, key: res.body.api_key, runsKey };
  }
}

/**
 * A Redis Cluster of 3 primaries and 3 replicas of its own (a killed primary would disturb the
 * shared one's other files) and a gateway on it with REDIS_WAIT_REPLICAS=1: after a failover the
 * promoted replica has no replica of its own, so each WAIT then times out (300 ms, a shortfall)
 * and the write is answered once the store shows it is there. A job add a failover took is made
 * again by the enqueue reconciler (runs unconfirmed for 2 s here).
 */
class WaitDeployment {
  prefix = `sytest-wait-${randomBytes(4).toString('hex')}`;
  cluster?: RedisCluster;
  gw?: GatewayProcess;
  worker?: SwitchyardWorker;
  private dir = '';

  async start(ctx: Mocha.Context, env: Record<string, string> = {}): Promise<void> {
    this.cluster = await RedisCluster.start({ server: requireProgram(ctx, REDIS_SERVER), cli: requireProgram(ctx, REDIS_CLI) });
    this.dir = mkdtempSync(path.join(os.tmpdir(), 'sy-wait-replicas-'));
    this.gw = await new GatewayProcess({ REDIS_CLUSTER_NODES: this.cluster.setting, REDIS_PREFIX: this.prefix, DATA_DIR: this.dir, REDIS_WAIT_REPLICAS: '1', REDIS_WAIT_TIMEOUT_MS: '300', ENQUEUE_RECONCILE_AFTER_MS: '2000', ...env }).start();
  }

  /** A key in the slot of the job queue's keys (models/redis/keys.ts, `queuePrefixOf`). */
  queueKey(): string {
    return new RedisKeys(`{${this.prefix}}`).queuePrefixOf(queueName(LLM, 'open'));
  }

  /** An SDK worker of the LLM kind that answers each prompt with itself (started by the caller; stopped with the rest). */
  echoWorker(token: string, slots: number): SwitchyardWorker {
    this.worker = new SwitchyardWorker({
      gateway: this.gw!.url,
      token,
      kinds: [LLM],
      slots,
      logger: silentLogger,
      handler: async (_kind, input) => ({ artifacts: [], extra: { text: String(input.prompt) }, usage: { input_tokens: 1, output_tokens: 1 } }),
    });
    return this.worker;
  }

  async stop(): Promise<void> {
    for (const node of this.cluster?.nodes ?? []) if (node.child.exitCode === null && node.child.signalCode === null) node.child.kill('SIGCONT');
    await this.worker?.stop({ timeoutMs: 0 });
    await this.gw?.kill();
    await this.cluster?.stop();
    if (this.dir) rmSync(this.dir, { recursive: true, force: true });
  }
}

/**
 * REDIS_WAIT_REPLICAS=1 on a Redis Cluster of 3 primaries and 3 replicas (a cluster of its own
 * per case: a killed primary would disturb the shared one's other files). Callers submit
 * without pause while a primary is SIGKILLed: the one holding the gateway's own keys (runs,
 * accounts), or the one holding the job queue (on a cluster each queue has a slot of its own,
 * docs/architecture.md, "Redis Cluster"). Its replica takes over and the gateway follows. Every
 * run answered 202 must be there after the failover and succeed, and no run's end may be
 * acknowledged to the worker twice (a settle the failover forgot would have run it again). A
 * 503 while the cluster fails over is the documented answer to retry.
 */
for (const target of ['runs', 'queue'] as const) {
  describe(`REDIS_WAIT_REPLICAS=1: the Redis Cluster primary of the ${target === 'runs' ? "gateway's runs" : 'job queue'} killed under load`, function () {
    this.timeout(180_000);
    const d = new WaitDeployment();

    // A lease the failover took is recovered when its lock lapses: 10 s here, not the default
    // 30 s (CI once had a run still unfinished 60 s after the failover with the default).
    before(async function () {
      await d.start(this, { LEASE_TTL_MS: '10000', HEARTBEAT_MS: '2000' });
    });
    after(() => d.stop());

    const call = (method: string, route: string, token: string, body?: unknown) => d.gw!.call(method, route, token, body);

    it('loses no run it accepted and acknowledges no run\'s end twice', async () => {
      const { key, runsKey } = await accountApartFromQueue(d.gw!, d.cluster!, d.prefix, 1_000_000);
      const operator = await call('POST', '/v1/admin/operators', ADMIN_TOKEN, { name: 'wait-op', trust: 'open' });
      assert.equal(operator.status, 201, JSON.stringify(operator.body));

      // The worker's view: how many times the gateway acknowledged each run's end.
      const acked = new Map<string, number>();
      const worker = d.echoWorker(operator.body.worker_token, 8);
      worker.on('completed', (lease) => acked.set(lease.run_id, (acked.get(lease.run_id) ?? 0) + 1));
      await worker.start();

      const accepted: string[] = [];
      const statuses = new Map<number, number>();
      let submitting = true;
      const submitter = async (n: number) => {
        for (let i = 0; submitting; i++) {
          const res = await call('POST', '/v1/jobs', key, { kind: LLM, input: { prompt: `s${n}-${i}` } });
          statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
          assert.ok(res.status === 202 || res.status === 503, `${res.status} ${JSON.stringify(res.body)}; the gateway's errors: ${JSON.stringify(d.gw!.lines.filter((l) => Number(l.level) >= 50).slice(-3))}`);
          if (res.status === 202) accepted.push(res.body.run_id);
        }
      };
      const load = Promise.all([1, 2, 3, 4].map(submitter));

      await until('runs accepted before the kill', async () => accepted.length >= 40, 60_000);
      const slotKey = target === 'runs' ? runsKey : d.queueKey();
      const primary = await d.cluster!.primaryOf(slotKey);
      // The accepts waited on that primary (WAIT is keyless: the probe of its slot takes it there).
      assert.ok(/cmdstat_wait:calls=[1-9]/.test(await d.cluster!.ask(primary, 'INFO', 'commandstats')), 'WAIT ran on the primary of the slot');
      const atKill = accepted.length;
      await d.cluster!.kill(primary);
      const survivor = d.cluster!.nodes.find((n) => n.port !== primary)!.port;
      await d.cluster!.until(async () => (await d.cluster!.liveOk()) && (await d.cluster!.primaryOf(slotKey, survivor)) !== primary, "a replica promoted in the killed primary's place", 60_000);
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
      assert.equal(d.gw!.child.exitCode, null, 'the gateway process lived through it');
      if (process.env.SY_TEST_VERBOSE) console.log({ target, accepted: accepted.length, atKill, statuses: Object.fromEntries(statuses) });
    });
  });
}

/**
 * The case the queue's own wait is for, made to happen: a job's add acknowledged by the queue's
 * primary while its replica is frozen (so the replica cannot have it), then that primary
 * killed and the replica, thawed, promoted without the job. The accept's wait on the queue's
 * slot fell short, so the run was left unconfirmed, and the enqueue reconciler adds its job
 * again after the failover: the run succeeds. Confirmed at once instead, it would wait forever
 * in a queue that no longer holds it.
 */
describe('REDIS_WAIT_REPLICAS=1: a job add the failover of its queue took is made again', function () {
  this.timeout(120_000);
  const d = new WaitDeployment();

  before(async function () {
    // One partition a queue, so the kind's one queue is on the primary whose replica is cut below.
    await d.start(this, { QUEUE_PARTITIONS: '1' });
  });
  after(() => d.stop());

  it('leaves the run unconfirmed, and the reconciler queues it again on the promoted replica', async () => {
    const call = (method: string, route: string, token: string, body?: unknown) => d.gw!.call(method, route, token, body);
    const { key } = await accountApartFromQueue(d.gw!, d.cluster!, d.prefix, 1_000);
    const operator = await call('POST', '/v1/admin/operators', ADMIN_TOKEN, { name: 'wait-add-op', trust: 'open' });

    const primary = await d.cluster!.primaryOf(d.queueKey());
    const replicaPort = Number(/slave0:ip=[^,]+,port=(\d+)/.exec(await d.cluster!.ask(primary, 'INFO', 'replication'))?.[1]);
    const replica = d.cluster!.nodes.find((n) => n.port === replicaPort)!;
    assert.ok(replica, `the queue primary's replica (${replicaPort})`);
    // Frozen, and its link cut by the primary: a frozen replica's kernel would still take in
    // the replication stream and apply it once thawed; without the link the primary sends none.
    replica.child.kill('SIGSTOP');
    let runId: string;
    try {
      assert.equal(await d.cluster!.ask(primary, 'CLIENT', 'KILL', 'TYPE', 'replica'), '1', 'the replication link cut');
      const res = await call('POST', '/v1/jobs', key, { kind: LLM, input: { prompt: 'taken by the failover' } });
      assert.equal(res.status, 202, JSON.stringify(res.body));
      runId = res.body.run_id;
      // The add is on the queue's primary alone; the replica that will replace it never sees it.
      assert.equal(await d.cluster!.ask(primary, 'EXISTS', `${d.queueKey()}:${queueName(LLM, 'open')}:${runId}`), '1', 'the job was added');
      await d.cluster!.kill(primary);
    } finally {
      replica.child.kill('SIGCONT');
    }
    const survivor = d.cluster!.nodes.find((n) => n.port !== primary && n.port !== replicaPort)!.port;
    await d.cluster!.until(async () => (await d.cluster!.liveOk()) && (await d.cluster!.primaryOf(d.queueKey(), survivor)) === replicaPort, 'the frozen replica promoted', 60_000);

    await d.echoWorker(operator.body.worker_token, 1).start();
    const run = await until('the run to succeed', async () => {
      const res = await call('GET', `/v1/jobs/${runId}`, key);
      return res.status === 200 && res.body.terminal && res.body;
    }, 60_000);
    assert.equal(run.status, 'succeeded', JSON.stringify(run.error));
    assert.ok(d.gw!.lines.some((l) => l.msg === 'enqueued an accepted run that missed its queue write' && l.runId === runId), 'the reconciler queued it again');
  });
});
