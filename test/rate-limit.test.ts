import assert from 'node:assert/strict';
import { TestGateway, cleanupPrefix, errorCode, sleep, uniquePrefix, type Res } from './helpers/harness.js';

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

describe('rate limit headers', () => {
  const prefix = uniquePrefix('ratelimit-headers');
  // A bucket of 5 that refills one request every 25 s: 125 s from empty to full. Slow enough
  // that no request of the test gets a refill, so each count is exact.
  const slow = new TestGateway(prefix, { RATE_LIMIT_PER_SEC: '0.04', RATE_LIMIT_BURST: '5' });
  // Two a second, to see a refill come when the headers said it would.
  const fast = new TestGateway(prefix, { RATE_LIMIT_PER_SEC: '2', RATE_LIMIT_BURST: '2' });
  before(async () => {
    await slow.start();
    await fast.start();
  });
  after(async () => {
    await slow.stop();
    await fast.stop();
    await cleanupPrefix(prefix);
  });

  /** The draft's `RateLimit` field of an answer: its remaining requests and the wait for one more. */
  function service(res: Res): { r: number; t: number } {
    const m = /^"key";r=(\d+);t=(\d+)$/.exec(res.headers.get('ratelimit') ?? '');
    assert.ok(m, `RateLimit: ${res.headers.get('ratelimit')}`);
    return { r: Number(m[1]), t: Number(m[2]) };
  }

  it('name the burst and the rate in RateLimit-Policy, count down on every route, and come with the 429', async () => {
    const { key } = await slow.account(100);
    // Reads, a plain submission (whose gate runs inside its create's script) and an error after
    // the gate share one bucket, and all say so.
    const answers = [
      await slow.request('GET', '/v1/account', { key }),
      await slow.submit(key),
      await slow.request('GET', '/v1/jobs/run_00000000000000000000000000', { key }),
      await slow.submit(key),
      await slow.request('GET', '/v1/capabilities', { key }),
    ];
    answers.forEach((res, i) => {
      assert.equal(res.status, [200, 202, 404, 202, 200][i], `${i}: ${res.text}`);
      assert.equal(res.headers.get('ratelimit-policy'), '"key";q=5;w=125;switchyard-rate=0.04', `${i}`);
      assert.equal(res.headers.get('ratelimit-limit'), '5', `${i}: the burst`);
      assert.equal(res.headers.get('ratelimit-remaining'), String(4 - i), `${i}`);
      const { r, t } = service(res);
      assert.equal(r, 4 - i, `${i}`);
      assert.ok(t >= 1 && t <= 25, `${i}: one more request within the 25 s a request takes to come back, not ${t}`);
    });
    const limited = await slow.request('GET', '/v1/account', { key });
    assert.equal(limited.status, 429);
    assert.equal(errorCode(limited), 'rate_limited');
    assert.equal(limited.headers.get('ratelimit-policy'), '"key";q=5;w=125;switchyard-rate=0.04');
    assert.equal(limited.headers.get('ratelimit-limit'), '5');
    assert.equal(limited.headers.get('ratelimit-remaining'), '0');
    const retryAfter = Number(limited.headers.get('retry-after'));
    assert.ok(retryAfter >= 1 && retryAfter <= 25, `Retry-After ${retryAfter}`);
    assert.deepEqual(service(limited), { r: 0, t: retryAfter });
    assert.equal(Math.ceil(limited.body.error.details.retry_after_ms / 1000), retryAfter);
  });

  it('promise no more than they keep: once t seconds have passed, the next request is admitted', async () => {
    const { key } = await fast.account(100);
    assert.equal((await fast.request('GET', '/v1/account', { key })).status, 200);
    const last = await fast.request('GET', '/v1/account', { key });
    assert.equal(last.status, 200);
    assert.equal(last.headers.get('ratelimit-policy'), '"key";q=2;w=1;switchyard-rate=2');
    const { r, t } = service(last);
    assert.equal(r, 0);
    // Waiting what the answer said, not a guess: the header is what is under test.
    await sleep(t * 1000);
    const next = await fast.request('GET', '/v1/account', { key });
    assert.equal(next.status, 200, `still limited ${t} s after RateLimit said one more would come`);
  });

  it('are declared in the OpenAPI document on every answer of an account route the gate admits, and on its 429', async () => {
    const doc = (await slow.request('GET', '/v1/openapi.json')).body;
    const fields = ['RateLimit-Limit', 'RateLimit-Remaining', 'RateLimit-Policy', 'RateLimit'];
    assert.deepEqual(Object.keys(doc.components.headers), fields);
    let answers = 0;
    for (const [path, item] of Object.entries(doc.paths as Record<string, Record<string, any>>)) {
      for (const [method, op] of Object.entries(item)) {
        const account = op.security?.some((s: object) => 'bearer' in s);
        for (const [status, res] of Object.entries(op.responses as Record<string, any>)) {
          const declared = fields.filter((f) => res.headers?.[f]?.$ref === `#/components/headers/${f}`);
          const admitted = Number(status) < 400 || status === '429';
          assert.deepEqual(declared, account && admitted ? fields : [], `${method} ${path} ${status}`);
          if (account && admitted) answers++;
        }
        if (account) assert.ok(op.responses['429'].headers['Retry-After'], `${method} ${path} 429 Retry-After`);
      }
    }
    assert.ok(answers > 40, `only ${answers} answers declare them`);
  });

  it('are absent when limiting is off', async () => {
    const off = new TestGateway(prefix, { RATE_LIMIT_PER_SEC: '0' });
    await off.start();
    try {
      const { key } = await off.account();
      const res = await off.request('GET', '/v1/account', { key });
      assert.equal(res.status, 200);
      for (const field of ['ratelimit-limit', 'ratelimit-remaining', 'ratelimit-policy', 'ratelimit']) assert.equal(res.headers.get(field), null, field);
    } finally {
      await off.stop();
    }
  });
});
