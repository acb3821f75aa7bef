import assert from 'node:assert/strict';
import net from 'node:net';
import type { Context } from 'mocha';
import { redisTarget, type RedisTarget } from '../models/redis-target.js';
import { ADMIN_TOKEN, ON_CLUSTER, REDIS_URL, TestGateway, cleanupPrefix, errorCode, uniquePrefix, until } from './helpers/harness.js';
import { REDIS_CLI, REDIS_SERVER, requireProgram } from './helpers/optional-program.js';
import { RawWorker } from './helpers/raw-worker.js';
import { RedisCluster } from './helpers/redis-cluster.js';
import { TcpProxy } from './helpers/tcp-proxy.js';

/** The link between a gateway and its Redis, through proxies a test can cut. */
interface Cable {
  /** The gateway's settings that send it through the proxies. */
  env: Record<string, string>;
  /** Where the gateway's keys are, for the cleanup. */
  target: RedisTarget;
  cutAll(): void;
  restore(): void;
  close(): Promise<void>;
}

/** One proxy in front of the tests' one Redis server. */
async function oneServerCable(): Promise<Cable> {
  const proxy = await new TcpProxy([Number(new URL(REDIS_URL).port || 6379)]).listen();
  return {
    env: { REDIS_URL: `redis://127.0.0.1:${proxy.port}` },
    target: redisTarget(REDIS_URL),
    cutAll: () => proxy.cutAll(),
    restore: () => proxy.restore(),
    close: () => proxy.close(),
  };
}

/**
 * A Redis Cluster of its own (3 primaries) with a proxy in front of each node, which each node
 * announces as its address: a cluster client learns the nodes from CLUSTER SLOTS and MOVED, so
 * a proxy in front of the run's shared cluster would only be used for the first slot map, and
 * the shared cluster's nodes cannot announce proxies without moving every other client too. The
 * nodes' bus links go direct, so a cut is the gateway's link failing, not the cluster.
 */
async function clusterCable(ctx: Context): Promise<Cable> {
  ctx.timeout(Math.max(ctx.timeout(), 60_000));
  const proxies: TcpProxy[] = [];
  const cluster = await RedisCluster.start(
    { server: requireProgram(ctx, REDIS_SERVER), cli: requireProgram(ctx, REDIS_CLI) },
    { primaries: 3, replicasEach: 0, announce: async (port) => proxies[proxies.push(await new TcpProxy([port]).listen()) - 1]!.port },
  );
  const nodes = proxies.map((p) => `127.0.0.1:${p.port}`).join(',');
  return {
    env: { REDIS_CLUSTER_NODES: nodes },
    target: redisTarget(REDIS_URL, nodes),
    cutAll: () => proxies.forEach((p) => p.cutAll()),
    restore: () => proxies.forEach((p) => p.restore()),
    close: async () => {
      await Promise.all(proxies.map((p) => p.close()));
      await cluster.stop();
    },
  };
}

/** True when a TCP connection to the port is refused (nothing listens). */
const refused = (port: number) =>
  new Promise<boolean>((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    socket.once('connect', () => (socket.destroy(), resolve(false)));
    socket.once('error', () => resolve(true));
  });

describe('health probes, and a gateway shutting down', function () {
  this.timeout(30_000);

  it('/healthz and /readyz answer without a credential while Redis answers', async () => {
    const prefix = uniquePrefix('health');
    const gw = await new TestGateway(prefix).start();
    try {
      const alive = await gw.request('GET', '/healthz');
      assert.deepEqual([alive.status, alive.body], [200, { status: 'ok' }]);
      const ready = await gw.request('GET', '/readyz');
      assert.deepEqual([ready.status, ready.body], [200, { status: 'ready' }]);
      assert.ok(ready.headers.get('x-request-id'));
    } finally {
      await gw.stop();
      await cleanupPrefix(prefix);
    }
  });

  it(`/readyz answers 503 unavailable while Redis${ON_CLUSTER ? ' (every node of a cluster)' : ''} cannot be reached and ready again once it can; /healthz stays 200`, async function () {
    const prefix = uniquePrefix('health-cut');
    // The gateway reaches Redis only through this proxy (one a node), which the test cuts like a failed link.
    const cable = ON_CLUSTER ? await clusterCable(this) : await oneServerCable();
    const gw = await new TestGateway(prefix, cable.env).start();
    try {
      assert.equal((await gw.request('GET', '/readyz')).status, 200);
      cable.cutAll();
      const down = await until('/readyz to fail', async () => {
        const res = await gw.request('GET', '/readyz');
        return res.status === 503 ? res : null;
      });
      assert.equal(errorCode(down), 'unavailable');
      assert.equal(down.headers.get('retry-after'), '1');
      assert.equal((await gw.request('GET', '/healthz')).status, 200, 'alive: the process answers');
      cable.restore();
      await until('/readyz to recover', async () => (await gw.request('GET', '/readyz')).status === 200);
    } finally {
      cable.restore();
      await gw.stop();
      await cleanupPrefix(prefix, cable.target);
      await cable.close();
    }
  });


  it('a submission waiting with Prefer: wait when the shutdown begins is answered 202 at once instead of being cut', async () => {
    const prefix = uniquePrefix('health-wait');
    const gw = await new TestGateway(prefix).start();
    try {
      const { id, key } = await gw.account(100);
      // No worker: the run cannot end, so the answer waits until the shutdown ends the wait.
      const waiting = gw.submit(key, undefined, { prefer: 'wait=60' });
      await until('the run to be accepted', async () => (await gw.stores.runs.list(id, { limit: 1 })).runs.length === 1);
      const stopped = gw.stop();
      const answer = await waiting;
      assert.equal(answer.status, 202);
      assert.equal(answer.body.status, 'queued');
      await stopped;
    } finally {
      await cleanupPrefix(prefix);
    }
  });

  it('during shutdown /readyz answers 503 for SHUTDOWN_DELAY_MS, then the instance stops accepting connections while a worker still drains', async () => {
    const prefix = uniquePrefix('health-stop');
    const gw = await new TestGateway(prefix, { SHUTDOWN_DELAY_MS: '1500', SHUTDOWN_DRAIN_MS: '10000', HEARTBEAT_MS: '300' }).start();
    const port = Number(new URL(gw.url).port);
    let worker: RawWorker | undefined;
    let stopped: Promise<void> | undefined;
    try {
      const { key } = await gw.account(100);
      const operator = await gw.request('POST', '/v1/admin/operators', { body: { name: 'op', trust: 'open' }, headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
      // A worker of protocol 1 holding a lease keeps the shutdown going until it reports.
      worker = await new RawWorker(gw.url, operator.body.worker_token).connect({ protocol: [1] });
      const run = (await gw.submit(key)).body.run_id;
      const lease = await worker.lease();
      stopped = gw.stop();

      const notReady = await gw.request('GET', '/readyz');
      assert.equal(notReady.status, 503);
      assert.equal(errorCode(notReady), 'unavailable');
      assert.match(notReady.body.error.message, /shutting down/);
      assert.equal(notReady.headers.get('connection'), 'close', 'answers close their connection while stopping');
      assert.equal((await gw.request('GET', `/v1/jobs/${run}`, { key })).status, 200, 'other requests are still served meanwhile');

      await worker.next((f) => f.type === 'drain');
      assert.ok(await refused(port), 'no new connection once the worker is told to drain');
      assert.equal((await worker.complete(lease, ['https://cdn.example/a.png'])).type, 'ack');
      await stopped;
      const after = await new TestGateway(prefix).start();
      assert.equal((await after.stores.runs.get(run))?.status, 'succeeded', 'the drained lease finished');
      await after.stop();
    } finally {
      worker?.terminate();
      await (stopped ?? gw.stop());
      await cleanupPrefix(prefix);
    }
  });
});
