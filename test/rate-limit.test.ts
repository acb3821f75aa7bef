import assert from 'node:assert/strict';
import { TestGateway, cleanupPrefix, errorCode, uniquePrefix } from './helpers/harness.js';

describe('rate limits', () => {
  const prefix = uniquePrefix('ratelimit');
  // A slow refill (one request a minute) so the test never races the clock.
  const env = { RATE_LIMIT_PER_SEC: String(1 / 60), RATE_LIMIT_BURST: '3' };
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

  it('answers 429 with Retry-After past the burst, counting requests on every instance', async () => {
    const { key } = await a.account();
    const first = await a.request('GET', '/v1/account', { key });
    assert.equal(first.status, 200);
    assert.equal(first.headers.get('ratelimit-limit'), '3');
    assert.equal(first.headers.get('ratelimit-remaining'), '2');
    assert.equal((await b.request('GET', '/v1/account', { key })).status, 200);
    assert.equal((await a.request('GET', '/v1/jobs', { key })).status, 200);
    const limited = await b.request('GET', '/v1/account', { key });
    assert.equal(limited.status, 429);
    assert.equal(errorCode(limited), 'rate_limited');
    const retryAfter = Number(limited.headers.get('retry-after'));
    assert.ok(retryAfter >= 1 && retryAfter <= 60, `Retry-After ${retryAfter}`);
  });

  it('limits each key on its own', async () => {
    const { key } = await a.account();
    for (let i = 0; i < 3; i++) assert.equal((await a.request('GET', '/v1/account', { key })).status, 200);
    assert.equal((await a.request('GET', '/v1/account', { key })).status, 429);
    // Key creation is itself limited for the exhausted key, so mint the second key as a fresh account's.
    const other = await a.account();
    assert.equal((await a.request('GET', '/v1/account', { key: other.key })).status, 200);
  });

  it('never writes anything for a limited submission', async () => {
    const { id, key } = await a.account(100);
    const results = await Promise.all(Array.from({ length: 10 }, () => a.submit(key)));
    assert.equal(results.filter((r) => r.status === 202).length, 3);
    assert.equal(results.filter((r) => r.status === 429).length, 7);
    const account = await a.stores.accounts.get(id);
    assert.deepEqual([account?.credits, account?.reserved, account?.in_flight], [88, 12, 3]);
  });
});
