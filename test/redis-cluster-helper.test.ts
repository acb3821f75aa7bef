import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { Cluster } from 'ioredis';
import { REDIS_CLI, REDIS_SERVER, requireProgram } from './helpers/optional-program.js';
import { RedisCluster } from './helpers/redis-cluster.js';

// The helper the cluster tests stand on: a real 3-primary, 3-replica cluster it made itself.
describe('test helper: a local Redis Cluster', function () {
  this.timeout(60_000);
  let cluster: RedisCluster | undefined;
  let bins: { server: string; cli: string };

  before(async function () {
    bins = { server: requireProgram(this, REDIS_SERVER), cli: requireProgram(this, REDIS_CLI) };
    cluster = await RedisCluster.start(bins);
  });
  after(async () => cluster?.stop());

  it('has 3 primaries and 3 replicas, every node saying the cluster is ok', async () => {
    assert.equal(cluster!.nodeList.length, 6);
    assert.equal((await cluster!.primaries()).length, 3);
    assert.equal(await cluster!.allOk(), true);
  });

  it('spreads keys of different slots over the primaries, and serves them all to a cluster client', async () => {
    const client = new Cluster(cluster!.nodeList.map((n) => ({ host: '127.0.0.1', port: Number(n.split(':')[1]) })));
    try {
      const keys = Array.from({ length: 30 }, (_, i) => `helper-key-${i}`);
      for (const key of keys) await client.set(key, key);
      for (const key of keys) assert.equal(await client.get(key), key);
      const holding = await Promise.all(client.nodes('master').map((n) => n.dbsize()));
      assert.equal(holding.filter((n) => n > 0).length, 3, `keys per primary: ${holding.join(', ')}`);
    } finally {
      client.disconnect();
    }
  });

  it('removes its directory and ends its processes on stop', async () => {
    const other = await RedisCluster.start(bins, { primaries: 3, replicasEach: 0 });
    await other.stop();
    assert.equal(existsSync(other.dir), false);
    assert.ok(other.nodes.every((n) => n.child.exitCode !== null || n.child.signalCode !== null));
  });
});

