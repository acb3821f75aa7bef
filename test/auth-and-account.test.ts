import assert from 'node:assert/strict';
import { ADMIN_TOKEN, TestGateway, cleanupPrefix, errorCode, uniquePrefix } from './helpers/harness.js';

const admin = { authorization: `Bearer ${ADMIN_TOKEN}` };

describe('authentication and the account area', () => {
  const prefix = uniquePrefix('auth');
  // Two instances on one Redis: what one revokes, the other refuses at once.
  const a = new TestGateway(prefix);
  const b = new TestGateway(prefix);
  before(async () => {
    await a.start();
    await b.start();
  });
  after(async () => {
    await a.stop();
    await b.stop();
    await cleanupPrefix(prefix);
  });

  function assert401(res: { status: number; headers: Headers; body: any }) {
    assert.equal(res.status, 401);
    assert.equal(res.body.error.code, 'unauthorized');
    assert.match(res.headers.get('www-authenticate') ?? '', /^Bearer/);
  }

  describe('account keys', () => {
    it('refuses a missing, malformed, unknown or wrongly hashed key with 401 and WWW-Authenticate', async () => {
      const { key } = await a.account();
      const forged = key.slice(0, -1) + (key.endsWith('A') ? 'B' : 'A'); // right lookup id, wrong secret
      for (const headers of <Record<string, string>[]>[
        {},
        { authorization: 'Bearer nope' },
        { authorization: `Basic ${Buffer.from(`x:${key}`).toString('base64')}` },
        { authorization: 'Bearer sy_aaaaaaaaaaaaaaaaAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA' },
        { authorization: `Bearer ${forged}` },
        { 'x-service-key': 'sy_short' },
      ]) {
        assert401(await a.request('GET', '/v1/account', { headers }));
      }
    });

    it('creates keys shown once, lists them without secrets, and each one works', async () => {
      const { key } = await a.account();
      const created = await a.request('POST', '/v1/account/keys', { key, body: { name: 'ci' } });
      assert.equal(created.status, 201);
      assert.deepEqual(Object.keys(created.body).sort(), ['created_at', 'id', 'key', 'name', 'prefix', 'revoked_at']);
      assert.ok(created.body.key.startsWith(created.body.prefix));
      const listed = await a.request('GET', '/v1/account/keys', { key });
      assert.equal(listed.status, 200);
      assert.equal(listed.body.data.length, 2);
      assert.ok(!listed.text.includes(created.body.key), 'the secret is never listed');
      assert.ok(listed.body.data.every((k: Record<string, unknown>) => !('hash' in k) && !('key' in k)));
      assert.equal((await a.request('GET', '/v1/account', { key: created.body.key })).status, 200);
      const noBody = await a.request('POST', '/v1/account/keys', { key });
      assert.equal(noBody.status, 201, 'the body is optional');
    });

    it('stores only a hash of each key', async () => {
      const { key } = await a.account();
      const redis = a.redis;
      let cursor = '0';
      do {
        const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}:key:*`, 'COUNT', 1000);
        cursor = next;
        for (const k of keys) assert.ok(!JSON.stringify(await redis.hgetall(k)).includes(key));
      } while (cursor !== '0');
    });

    it('refuses a revoked key at once on every instance, even one that has it cached', async () => {
      const { key } = await a.account();
      const second = (await a.request('POST', '/v1/account/keys', { key })).body;
      assert.equal((await b.request('GET', '/v1/account', { key: second.key })).status, 200, 'b has it cached now');
      const revoked = await a.request('DELETE', `/v1/account/keys/${second.id}`, { key });
      assert.equal(revoked.status, 200);
      assert.ok(revoked.body.revoked_at);
      assert401(await b.request('GET', '/v1/account', { key: second.key }));
      assert401(await a.request('GET', '/v1/account', { key: second.key }));
      assert.equal((await b.request('GET', '/v1/account', { key })).status, 200, 'the other key still works');
    });

    it("answers 404 when revoking another account's key or an unknown one", async () => {
      const x = await a.account();
      const y = await a.account();
      const ykey = (await a.request('GET', '/v1/account/keys', { key: y.key })).body.data[0];
      const res = await a.request('DELETE', `/v1/account/keys/${ykey.id}`, { key: x.key });
      assert.equal(res.status, 404);
      assert.equal(errorCode(res), 'not_found');
      assert.equal((await a.request('GET', '/v1/account', { key: y.key })).status, 200, "y's key still works");
      assert.equal((await a.request('DELETE', '/v1/account/keys/key_zzzzzzzzzzzzzzzz', { key: x.key })).status, 404);
    });

    it('mints open-trust worker tokens for the account', async () => {
      const { key } = await a.account();
      const res = await a.request('POST', '/v1/account/worker-tokens', { key });
      assert.equal(res.status, 201);
      assert.equal(res.body.trust, 'open');
      assert.match(res.body.worker_token, /^swt_/);
      assert.ok(res.body.id && res.body.created_at);
    });
  });

  describe('admin API', () => {
    it('creates an account with a working key and the credits given', async () => {
      const res = await a.request('POST', '/v1/admin/accounts', { body: { name: 'studio', credits: 250 }, headers: admin });
      assert.equal(res.status, 201);
      assert.equal(res.body.account.credits, 250);
      assert.equal(res.body.account.name, 'studio');
      const me = await a.request('GET', '/v1/account', { key: res.body.api_key });
      assert.equal(me.body.id, res.body.account.id);
      const zero = await a.request('POST', '/v1/admin/accounts', { body: { name: 'no credits' }, headers: admin });
      assert.equal(zero.body.account.credits, 0);
    });

    it('also accepts basic auth with user admin', async () => {
      const basic = `Basic ${Buffer.from(`admin:${ADMIN_TOKEN}`).toString('base64')}`;
      const res = await a.request('POST', '/v1/admin/accounts', { body: { name: 'x' }, headers: { authorization: basic } });
      assert.equal(res.status, 201);
    });

    it('creates operators with a worker token of their trust', async () => {
      const res = await a.request('POST', '/v1/admin/operators', { body: { name: 'farm', trust: 'trusted' }, headers: admin });
      assert.equal(res.status, 201);
      assert.equal(res.body.operator.trust, 'trusted');
      assert.match(res.body.operator.id, /^op_/);
      assert.match(res.body.worker_token, /^swt_/);
      const bad = await a.request('POST', '/v1/admin/operators', { body: { name: 'farm', trust: 'private' }, headers: admin });
      assert.equal(bad.status, 400);
    });

    it('answers 401 for a missing or wrong admin token, and for an account key', async () => {
      const { key } = await a.account();
      for (const headers of <Record<string, string>[]>[{}, { authorization: 'Bearer wrong-token-wrong-token' }, { authorization: `Bearer ${key}` }, { authorization: `Basic ${Buffer.from(`root:${ADMIN_TOKEN}`).toString('base64')}` }]) {
        const res = await a.request('POST', '/v1/admin/accounts', { body: { name: 'x' }, headers });
        assert401(res);
      }
    });

    it('is disabled when ADMIN_TOKEN is unset', async () => {
      const p = uniquePrefix('noadmin');
      const gw = new TestGateway(p, { ADMIN_TOKEN: '' });
      await gw.start();
      try {
        const res = await gw.request('POST', '/v1/admin/accounts', { body: { name: 'x' }, headers: admin });
        assert401(res);
        assert.match(res.body.error.message, /disabled/);
      } finally {
        await gw.stop();
        await cleanupPrefix(p);
      }
    });
  });
});
