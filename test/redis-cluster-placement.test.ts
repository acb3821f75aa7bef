import assert from 'node:assert/strict';
import { primariesOf, type RedisClient } from '../models/redis-connection.js';
import { RedisStores } from '../models/redis/redis-stores.js';
import { redisTarget } from '../models/redis-target.js';
import { REDIS_URL, cleanupPrefix, newRunSpec, testRedis, uniquePrefix } from './helpers/harness.js';
import { clusterNodes } from './helpers/redis-cluster.js';

const ACCOUNTS = 300;
const RUNS_EACH = 10;

/**
 * Where runs land on a real Redis Cluster of 3 primaries (docs/architecture.md, "Redis
 * Cluster"): under their account group's hash tag, so 3,000 runs of 300 accounts spread over
 * every primary (none holds more than 45%), while each run's keys (its record, event log and
 * counters) and its account's stay together on one node, where its create and settle scripts run.
 */
describe('Redis Cluster placement of runs', function () {
  this.timeout(120_000);
  const prefix = uniquePrefix('placement', true);
  let redis: RedisClient;
  let stores: RedisStores;
  let target: ReturnType<typeof redisTarget>;
  const runIds: string[] = [];

  before(async function () {
    target = redisTarget(REDIS_URL, await clusterNodes(this));
    redis = testRedis('test-placement', target);
    stores = new RedisStores(redis, prefix, { retentionSeconds: 3600, fairShareStep: 3, eventLog: { maxLength: 100, ttlMs: 3_600_000 } });
    for (let a = 0; a < ACCOUNTS; a += 30) {
      const accounts = await Promise.all(Array.from({ length: 30 }, (_, i) => stores.accounts.create({ name: `placement-${a + i}`, credits: 1_000 })));
      const made = await Promise.all(accounts.flatMap((acct) => Array.from({ length: RUNS_EACH }, () => stores.runs.create(newRunSpec(acct.id)))));
      for (const m of made) {
        assert.equal(m.outcome, 'created');
        if (m.outcome === 'created') runIds.push(m.run.run_id);
      }
    }
  });

  after(async () => {
    redis?.disconnect();
    if (target) await cleanupPrefix(prefix, target);
  });

  /** The keys under the deployment's prefix that each primary holds and match `pattern` (after the prefix's base). */
  async function perPrimary(pattern: string): Promise<string[][]> {
    const base = prefix.replace(/[{}]/g, '');
    const held: string[][] = [];
    for (const node of await primariesOf(redis)) {
      const keys: string[] = [];
      let cursor = '0';
      do {
        const [next, batch] = await node.scan(cursor, 'MATCH', `${base}:${pattern}`, 'COUNT', 1000);
        cursor = next;
        keys.push(...batch);
      } while (cursor !== '0');
      held.push(keys);
    }
    return held;
  }

  it('spreads 3,000 runs of 300 accounts over every primary, none holding more than 45%', async () => {
    const held = (await perPrimary('{a*}:run:run_*')).map((keys) => keys.length);
    assert.equal(held.reduce((x, y) => x + y, 0), ACCOUNTS * RUNS_EACH, `runs found per primary: ${held.join(' / ')}`);
    assert.equal(held.length, 3);
    for (const n of held) assert.ok(n > 0 && n <= 0.45 * ACCOUNTS * RUNS_EACH, `runs per primary: ${held.join(' / ')}`);
  });

  it("keeps a run's keys, its event log and its account's on one node", async () => {
    const runId = runIds[0]!;
    const run = (await stores.runs.get(runId))!;
    for (const [from, to] of [['queued', 'running'], ['running', 'succeeded']] as const) {
      const t = await stores.runs.transition(run, { from: [from], to, logStatus: true, set: to === 'succeeded' ? { finished_at: new Date().toISOString() } : { started_at: new Date().toISOString() } });
      assert.equal(t.ok, true);
      assert.equal(t.statusLogged, true, 'the status change was logged in the same script');
    }
    const held = await perPrimary(`{a*}:*${runId}*`);
    const nodes = held.filter((keys) => keys.length > 0);
    assert.equal(nodes.length, 1, `the run's keys are on ${nodes.length} primaries`);
    const keys = nodes[0]!.map((k) => k.slice(k.indexOf('}:') + 2).replace(runId, '<id>')).sort();
    assert.deepEqual(keys, ['evlog:<id>', 'evseq:<id>', 'run:<id>'], 'the record, its event log and its counter');
    const accountHeld = await perPrimary(`{a*}:acct:${run.account_id}`);
    assert.deepEqual(accountHeld.map((k) => k.length > 0), held.map((k) => k.length > 0), "its account's record is on the same primary");
    const account = (await stores.accounts.get(run.account_id))!;
    assert.equal(account.reserved, 4 * (RUNS_EACH - 1), 'the settle released the run\'s reservation in the same step');
  });
});
