import assert from 'node:assert/strict';
import { gateCalls, scriptCalls } from './helpers/script-calls.js';
import { TestGateway, cleanupPrefix, errorCode, uniquePrefix } from './helpers/harness.js';

/**
 * A plain POST /v1/jobs runs its key's request gate inside the script that creates its run
 * (models/redis/scripts/gated-create-run.ts); every other submission, and every request that
 * fails before its create, runs the gate on its own. Either way: one request off the limit, a
 * revoked or limited key refused before anything is written.
 */
describe('the submission gate', () => {
  const prefix = uniquePrefix('submitgate');
  const env = { RATE_LIMIT_PER_SEC: String(1 / 60), RATE_LIMIT_BURST: '6' };
  const a = new TestGateway(prefix, env);
  const b = new TestGateway(prefix, env);
  before(async () => {
    await a.start();
    await b.start();
  });
  after(async () => {
    await a.stop();
    await b.stop();
    await cleanupPrefix(prefix);
  });

  it('runs in the same Redis script as the create of a plain submission, on a cluster too (the key\'s limiter is in its account\'s slot)', async () => {
    const { key } = await a.account();
    const gated = gateCalls(await scriptCalls(a, async () => {
      assert.equal((await a.submit(key)).status, 202);
    }));
    assert.equal(gated.length, 1, 'the gate ran once');
    // Fused: one script, one round trip (models/redis/keys.ts: on a cluster the key's limiter is in its account's group).
    assert.ok(gated[0].some((x) => /:run:run_/.test(x)), 'in the call that creates the run');
  });

  it('takes one request off the limit whatever path a submission takes, and refuses past it without writing', async () => {
    const { id, key } = await a.account(100);
    const remaining = (res: { headers: Headers }) => res.headers.get('ratelimit-remaining');
    const plain = await a.submit(key);
    assert.equal(plain.status, 202);
    assert.equal(remaining(plain), '5');
    const invalid = await b.submit(key, { kind: 'inference:image:generate', input: {} });
    assert.equal(invalid.status, 400);
    assert.equal(remaining(invalid), '4');
    const keyed = await a.submit(key, undefined, { 'Idempotency-Key': 'k-1' });
    assert.equal(keyed.status, 202);
    assert.equal(remaining(keyed), '3');
    const replay = await b.submit(key, undefined, { 'Idempotency-Key': 'k-1' });
    assert.equal(replay.status, 202);
    assert.equal(replay.body.run_id, keyed.body.run_id);
    assert.equal(remaining(replay), '2');
    const badJson = await a.request('POST', '/v1/jobs', { key, raw: '{"kind":', headers: { 'content-type': 'application/json' } });
    assert.equal(badJson.status, 400);
    assert.equal(remaining(badJson), '1');
    assert.equal((await b.submit(key)).status, 202);
    // The limit is reached: the next ones are refused, the invalid one as limited rather than invalid.
    const limited = await a.submit(key);
    assert.equal(limited.status, 429);
    assert.equal(errorCode(limited), 'rate_limited');
    assert.equal(errorCode(await b.submit(key, { kind: 'inference:image:generate', input: {} })), 'rate_limited');
    const account = await a.stores.accounts.get(id);
    // Three runs (the replay made none) of 4 credits each.
    assert.deepEqual([account?.credits, account?.reserved, account?.in_flight], [88, 12, 3]);
  });

  it("refuses a revoked key's submissions on every instance, whatever their body, creating nothing", async () => {
    const { id, key } = await a.account(100);
    const second = (await a.request('POST', '/v1/account/keys', { key })).body;
    assert.equal((await b.submit(second.key)).status, 202, 'b has the key cached now');
    assert.equal((await a.request('DELETE', `/v1/account/keys/${second.id}`, { key })).status, 200);
    for (const res of [
      await b.submit(second.key),
      await b.submit(second.key, { kind: 'inference:image:generate', input: {} }),
      await b.submit(second.key, undefined, { 'Idempotency-Key': 'k-2' }),
    ]) {
      assert.equal(res.status, 401);
      assert.equal(errorCode(res), 'unauthorized');
    }
    const account = await a.stores.accounts.get(id);
    assert.deepEqual([account?.credits, account?.reserved, account?.in_flight], [96, 4, 1]);
  });
});
