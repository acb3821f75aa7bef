import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Webhook } from 'standardwebhooks';
import { primariesOf } from '../models/redis-connection.js';
import { accountGroup } from '../models/ids.js';
import { redisTarget } from '../models/redis-target.js';
import { queueName } from '../queues/queue-names.js';
import { runCliWorker } from './helpers/cli-worker.js';
import { GatewayProcess } from './helpers/gateway-process.js';
import { ADMIN_TOKEN, REDIS_URL, cleanupPrefix, testRedis, until } from './helpers/harness.js';
import { kindInputs } from './helpers/kind-inputs.js';
import { clusterNodes } from './helpers/redis-cluster.js';
import { SseClient } from './helpers/sse-client.js';
import { Receiver } from './helpers/webhook-receiver.js';

/**
 * A gateway on a real Redis Cluster (3 primaries, 3 replicas; test/helpers/redis-cluster.ts), as
 * production would run it: `switchyard serve` given REDIS_CLUSTER_NODES, real CLI demo workers,
 * a caller following a job's events over SSE and a webhook delivered to a real HTTPS receiver.
 * The prefix is given without a hash tag: the gateway must add one (docs/architecture.md,
 * "Redis Cluster"), or its scripts would be refused CROSSSLOT; its queues each get one of their own.
 */
const KINDS = ['inference:image:generate', 'inference:llm:text-generate', 'inference:audio:text-to-speech', 'inference:3d:image-to-mesh'];

describe('gateway on a Redis Cluster', function () {
  this.timeout(60_000);
  const prefix = `sytest-cluster-gw-${randomBytes(4).toString('hex')}`;
  let nodes: string;
  let dir: string;
  let receiver: Receiver;
  let gw: GatewayProcess;
  let key: string;
  let accountId: string;
  let token: string;

  const admin = { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' };
  async function call(method: string, route: string, headers: Record<string, string>, body?: unknown): Promise<{ status: number; body: any }> {
    const res = await fetch(gw.url + route, { method, headers, ...(body !== undefined && { body: JSON.stringify(body) }) });
    const text = await res.text();
    return { status: res.status, body: text ? JSON.parse(text) : null };
  }

  before(async function () {
    nodes = await clusterNodes(this);
    dir = mkdtempSync(path.join(os.tmpdir(), 'sy-cluster-gw-'));
    receiver = await new Receiver().start(dir);
    gw = await new GatewayProcess({
      REDIS_CLUSTER_NODES: nodes,
      REDIS_PREFIX: prefix,
      // Rate limiting on, so each request runs the API key's limiter (under the key's tag); slow
      // enough that the limiter's key (it expires once the bucket is full again) outlives the
      // first test: each request adds a second to it, the burst letting them all through.
      RATE_LIMIT_PER_SEC: '1',
      RATE_LIMIT_BURST: '1000',
      DATA_DIR: dir,
      OUTBOUND_CA_FILE: Receiver.caFile(dir),
      OUTBOUND_ALLOW_CIDRS: '127.0.0.1/32',
      OUTBOUND_ALLOWED_PORTS: String(receiver.port),
    }).start();
    const account = await call('POST', '/v1/admin/accounts', admin, { name: 'cluster', credits: 10_000 });
    assert.equal(account.status, 201, JSON.stringify(account.body));
    key = account.body.api_key;
    accountId = account.body.account.id;
    const operator = await call('POST', '/v1/admin/operators', admin, { name: 'cluster-op', trust: 'open' });
    assert.equal(operator.status, 201, JSON.stringify(operator.body));
    token = operator.body.worker_token;
  });

  after(async () => {
    await gw?.kill();
    await receiver?.stop();
    if (nodes) await cleanupPrefix(`{${prefix}}`, redisTarget(REDIS_URL, nodes));
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('completes jobs of several kinds from CLI demo workers, with their events followed over SSE and a webhook delivered', async () => {
    const inputs = await kindInputs();
    const caller = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
    const hook = receiver.url('/hook/cluster');
    const args = ['--engine', 'demo', '--demo-delay-ms', '50', '--kinds', KINDS.join(',')];
    const { code, stderr } = await runCliWorker({ gateway: gw.url, token, env: process.env }, args, async () => {
      const runs: string[] = [];
      for (const kind of KINDS) {
        const res = await call('POST', '/v1/jobs', caller, { kind, input: inputs[kind], ...(runs.length === 0 && { webhook: hook }) });
        assert.equal(res.status, 202, JSON.stringify(res.body));
        runs.push(res.body.run_id);
      }
      // Each run followed to its end: the events come through the cluster's pub/sub and log.
      for (const runId of runs) {
        const sse = await new SseClient(`${gw.url}/v1/jobs/${runId}/events`, key, { lastEventId: 0 }).open();
        try {
          assert.equal(sse.status, 200);
          await sse.until((c) => c.frames.some((f) => f.event === 'done'), 30_000);
          assert.equal(sse.frames.at(-1)!.data.status, 'succeeded', `${runId}: ${sse.frames.map((f) => f.event).join(' ')}`);
          assert.ok(sse.frames.some((f) => f.event === 'status' && f.data.status === 'running'), 'it was seen running');
        } finally {
          sse.close();
        }
        const job = await call('GET', `/v1/jobs/${runId}`, { authorization: `Bearer ${key}` });
        assert.equal(job.body.status, 'succeeded');
      }
      const [delivered] = await until('the webhook', async () => receiver.at('/hook/cluster').length > 0 && receiver.at('/hook/cluster'), 20_000);
      const secret = (await call('GET', '/v1/account/webhook-secret', { authorization: `Bearer ${key}` })).body.secret;
      const payload = new Webhook(secret).verify(delivered.body, delivered.headers as Record<string, string>) as { type: string; data: { run_id: string } };
      assert.equal(payload.type, 'job.completed');
      assert.equal(payload.data.run_id, runs[0]);
    });
    assert.equal(code, 0, stderr);
  });

  it("keeps its keys in the prefix's slot, except each queue's, instance's, lease's and account group's (with its API keys' limiters), in a slot of its own; the queues spread over the primaries", async () => {
    const redis = testRedis('test-cluster-keys', redisTarget(REDIS_URL, nodes));
    try {
      const held = new Map<string, string[]>();
      for (const node of await primariesOf(redis)) {
        const { port } = node.options;
        held.set(String(port), [...(await node.keys(`{${prefix}}:*`)), ...(await node.keys(`${prefix}:*`))]);
      }
      const keys = [...held.values()].flat();
      assert.ok(keys.length > 10, `keys written: ${keys.length}`);
      const queued = keys.filter((k) => k.startsWith(`${prefix}:q:{`));
      // An instance's fleet counts and a lease under their own tags (models/redis/keys.ts).
      const apart = keys.filter((k) => ['fleet', 'lease'].some((what) => k.startsWith(`${prefix}:${what}:{`)));
      assert.ok(apart.some((k) => k.startsWith(`${prefix}:fleet:{${gw.gatewayId}}:`)), "the instance's fleet counts have its tag");
      // The account, its runs and their event logs under its group's tag (models/ids.ts, accountGroup): one group, one slot.
      const grouped = keys.filter((k) => k.startsWith(`${prefix}:{a`));
      assert.deepEqual([...new Set(grouped.map((k) => /\{(a..)\}/.exec(k)![1]))], [`a${accountGroup(accountId)}`], 'one account, one group');
      for (const what of ['acct', 'run', 'evlog']) assert.ok(grouped.some((k) => k.includes(`}:${what}:`)), `its ${what} keys are in the group`);
      // So is its API key's limiter: a submission's gate runs in its create's script.
      assert.ok(grouped.some((k) => /\}:key:[^:]+:rl$/.test(k)), "the caller's API key's limiter is in its account's group");
      const own = keys.filter((k) => !queued.includes(k) && !apart.includes(k) && !grouped.includes(k));
      assert.ok(own.every((k) => k.startsWith(`{${prefix}}:`)), `untagged keys: ${own.filter((k) => !k.startsWith('{')).join(', ')}`);
      assert.equal([...held.values()].filter((list) => list.some((k) => own.includes(k))).length, 1, "the gateway's own keys are on one primary");
      // BullMQ's keys of a queue under `<prefix>:q:{<queue>}`: one slot per queue (its scripts need it).
      // A partition's tag is its name, salted (models/redis/queue-partitions.ts): read as its queue's.
      const queues = new Set(queued.map((k) => /^[^{]*\{([^}]+)\}/.exec(k)![1].replace(/#\d+of\d+\.\d+$/, '')));
      for (const kind of KINDS) assert.ok(queues.has(queueName(kind, 'open')), `the queue of ${kind} has its own tag`);
      assert.ok(queues.has('webhooks'), 'so has the webhook queue');
      const primaries = [...held.values()].filter((list) => list.some((k) => queued.includes(k))).length;
      // The four kinds' queues and the webhooks' hash to slots of all three primaries.
      assert.equal(primaries, 3, `queue keys on ${primaries} primaries`);
    } finally {
      redis.disconnect();
    }
  });
});
