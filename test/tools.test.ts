import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Webhook } from 'standardwebhooks';
import { SecretBox } from '../api/services/tools/secret-box.js';
import type { ToolRecord } from '../api/services/tools/tool-service.js';
import { TestGateway, cleanupPrefix, errorCode, testRedis, uniquePrefix, type Res } from './helpers/harness.js';
import { ToolServer } from './helpers/tool-server.js';

/**
 * Custom tools end to end: a real gateway with TOOL_SECRET_KEY, and a real HTTPS tool server
 * whose self-signed certificate the gateway trusts only through OUTBOUND_CA_FILE.
 */
describe('custom tools', function () {
  this.timeout(30_000);
  const prefix = uniquePrefix('tools');
  let dir: string;
  let server: ToolServer;
  let gw: TestGateway;
  let a: { id: string; key: string };
  let b: { id: string; key: string };
  let n = 0;
  const weather = { type: 'object', properties: { city: { type: 'string' }, days: { type: 'integer', minimum: 1 } }, required: ['city'], additionalProperties: false };

  /** A registration body with a fresh name and path; `over` replaces fields. */
  const def = (over: Record<string, unknown> = {}) => ({
    name: `tool_${++n}`,
    description: 'Looks up the weather of a city',
    kind: 'http',
    method: 'GET',
    url: server.url(`/t/${n}`),
    inputSchema: weather,
    ...over,
  });

  const create = (body: unknown, key = a.key) => gw.request('POST', '/v1/tools/definitions', { body, key });

  async function created(body: unknown, key = a.key): Promise<any> {
    const res = await create(body, key);
    assert.equal(res.status, 201, res.text);
    return res.body;
  }

  const refusal = (res: Res) => [res.status, errorCode(res)];

  before(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'sy-tools-'));
    server = await new ToolServer(dir).start();
    gw = await new TestGateway(prefix, {
      DATA_DIR: dir,
      OUTBOUND_CA_FILE: server.caFile,
      OUTBOUND_ALLOW_CIDRS: '127.0.0.1/32',
      OUTBOUND_ALLOWED_PORTS: String(server.port),
      TOOL_SECRET_KEY: randomBytes(32).toString('base64'),
    }).start();
    a = await gw.account();
    b = await gw.account();
  });

  after(async () => {
    await gw?.stop();
    await server?.stop();
    await cleanupPrefix(prefix);
    rmSync(dir, { recursive: true, force: true });
  });

  describe('registration', () => {
    it('registers an http tool and lists, gets and deletes it', async () => {
      const body = def();
      const res = await create(body);
      assert.equal(res.status, 201, res.text);
      const tool = res.body;
      assert.match(tool.id, /^tool_[0-9A-Z]{26}$/);
      assert.equal(tool.tool_id, `custom:${tool.id}`);
      assert.equal(res.headers.get('location'), `/v1/tools/definitions/${tool.id}`);
      assert.deepEqual(
        { ...tool, id: undefined, tool_id: undefined, created_at: undefined },
        { ...body, auth: null, id: undefined, tool_id: undefined, created_at: undefined },
      );
      assert.ok(!Number.isNaN(Date.parse(tool.created_at)));
      assert.equal('signing_secret' in tool, false, 'only webhook tools have a signing secret');

      assert.deepEqual((await gw.request('GET', `/v1/tools/definitions/${tool.id}`, { key: a.key })).body, tool);
      assert.deepEqual((await gw.request('GET', `/v1/tools/definitions/${tool.tool_id}`, { key: a.key })).body, tool, 'custom:<id> names it too');
      assert.ok((await gw.request('GET', '/v1/tools/definitions', { key: a.key })).body.data.some((t: any) => t.id === tool.id));

      const deleted = await gw.request('DELETE', `/v1/tools/definitions/${tool.id}`, { key: a.key });
      assert.deepEqual([deleted.status, deleted.body], [200, tool]);
      assert.deepEqual(refusal(await gw.request('GET', `/v1/tools/definitions/${tool.id}`, { key: a.key })), [404, 'not_found']);
      assert.deepEqual(refusal(await gw.request('DELETE', `/v1/tools/definitions/${tool.id}`, { key: a.key })), [404, 'not_found']);
      assert.ok(!(await gw.request('GET', '/v1/tools/definitions', { key: a.key })).body.data.some((t: any) => t.id === tool.id));
    });

    it('lists only the account\'s own tools, oldest first', async () => {
      const c = await gw.account();
      const first = await created(def(), c.key);
      const second = await created(def(), c.key);
      await created(def(), b.key);
      const list = await gw.request('GET', '/v1/tools/definitions', { key: c.key });
      assert.deepEqual(list.body, { data: [first, second] });
    });

    it('never returns the bearer token, and stores it only encrypted', async () => {
      const token = `secret-token-${randomBytes(12).toString('hex')}`;
      const res = await create(def({ auth: { type: 'bearer', token } }));
      assert.equal(res.status, 201, res.text);
      assert.deepEqual(res.body.auth, { type: 'bearer' });
      const answers = [res, await gw.request('GET', `/v1/tools/definitions/${res.body.id}`, { key: a.key }), await gw.request('GET', '/v1/tools/definitions', { key: a.key })];
      for (const answer of answers) assert.ok(!answer.text.includes(token), 'no answer carries the token');

      const redis = testRedis('test-tools');
      try {
        const raw = await redis.hgetall(`${prefix}:tool:${res.body.id}`);
        assert.equal(raw.account_id, a.id);
        assert.ok(!JSON.stringify(raw).includes(token), 'the stored record does not hold the token in clear');
        const sealed = JSON.parse(raw.doc).secrets.bearer_token as string;
        assert.match(sealed, /^v1\.[0-9a-f]{8}\.[\w-]{16}\.[\w-]{22}\.[\w-]+$/, 'version, key id, 12-byte IV, 16-byte tag, ciphertext');
      } finally {
        redis.disconnect();
      }
    });

    it('gives a webhook tool a whsec_ signing secret once, POST as its method, and needs no method in the body', async () => {
      const { method: _method, ...body } = def({ kind: 'webhook' });
      const tool = await created(body);
      assert.match(tool.signing_secret, /^whsec_[A-Za-z0-9+/]+=*$/);
      assert.equal(tool.method, 'POST');
      const again = await gw.request('GET', `/v1/tools/definitions/${tool.id}`, { key: a.key });
      assert.equal('signing_secret' in again.body, false, 'shown only at creation');
      assert.ok(!again.text.includes(tool.signing_secret.slice(6)));
    });

    it('refuses input schemas that do not compile or do not describe an object (invalid_schema)', async () => {
      const schemas: unknown[] = [
        { type: 'string' },
        { properties: { city: { type: 'string' } } },
        { type: 'nope' },
        { type: 'object', properties: { city: { type: 'string', nope: true } } },
        { type: 'object', properties: { when: { type: 'string', format: 'not-a-format' } } },
        { type: 'object', properties: { city: { $ref: 'https://example.com/city.json' } } },
        { type: 'object', $async: true },
        { type: 'object', description: 'x'.repeat(64 * 1024) },
      ];
      for (const inputSchema of schemas) {
        const res = await create(def({ inputSchema }));
        assert.deepEqual(refusal(res), [400, 'invalid_schema'], JSON.stringify(inputSchema).slice(0, 100));
        assert.equal(res.body.error.details.path, '/inputSchema');
      }
      const unknownKeyword = await create(def({ inputSchema: { type: 'object', nope: 1 } }));
      assert.match(unknownKeyword.body.error.details.ajv, /strict mode: unknown keyword: "nope"/, "ajv's own message is in details");
      // A pattern that could backtrack exponentially would run on the event loop at every call.
      const redos = await create(def({ inputSchema: { type: 'object', properties: { city: { type: 'string', pattern: '^(a+)+$' } } } }));
      assert.deepEqual(refusal(redos), [400, 'invalid_schema']);
      assert.match(redos.body.error.message, /exponential/);
      const plain = await create(def({ name: 'plainpattern', inputSchema: { type: 'object', properties: { city: { type: 'string', pattern: '^[A-Z][a-z]+$' } } } }));
      assert.equal(plain.status, 201, plain.text);
      const badType = await create(def({ inputSchema: { type: 'object', properties: { city: { type: 'nope' } } } }));
      assert.ok(badType.body.error.details.errors.some((e: any) => e.path === '/inputSchema/properties/city/type'), badType.text);
    });

    it('takes the schemas LLM functions use: union types, $defs references, formats', async () => {
      const inputSchema = {
        type: 'object',
        properties: { when: { type: ['string', 'null'], format: 'date' }, place: { $ref: '#/$defs/place' } },
        required: ['place'],
        $defs: { place: { type: 'object', properties: { city: { type: 'string' } } } },
      };
      await created(def({ inputSchema }));
    });

    it('refuses URLs that are not https, carry credentials or name a port that is not allowed (invalid_url)', async () => {
      for (const url of [server.url('/x').replace('https:', 'http:'), server.url('/x').replace('//', '//user:pass@'), 'https://127.0.0.1:1/x', 'not a url']) {
        const res = await create(def({ url }));
        assert.deepEqual(refusal(res), [400, 'invalid_url'], url);
        assert.equal(res.body.error.details.path, '/url');
      }
    });

    it('refuses URLs that lead to private, link-local or IPv4-mapped private addresses (url_blocked)', async () => {
      for (const host of ['10.0.0.1', '169.254.169.254', '[::ffff:10.0.0.1]', '0x0a000001']) {
        const res = await create(def({ url: `https://${host}:${server.port}/x` }));
        assert.deepEqual(refusal(res), [400, 'url_blocked'], host);
      }
    });

    it('refuses bad names, methods and fields (invalid_request)', async () => {
      const { method: _method, ...noMethod } = def();
      const bodies: unknown[] = [
        def({ name: 'has space' }),
        def({ name: 'x'.repeat(65) }),
        def({ name: '' }),
        def({ method: 'FETCH' }),
        def({ method: 'get' }),
        noMethod,
        def({ kind: 'webhook', method: 'GET' }),
        def({ kind: 'webhook', method: 'POST', auth: { type: 'bearer', token: 'abc' } }),
        def({ kind: 'grpc' }),
        def({ description: 'x'.repeat(1001) }),
        def({ description: '' }),
        def({ auth: { type: 'basic', token: 'abc' } }),
        def({ auth: { type: 'bearer', token: 'has\r\nnewline' } }),
        def({ auth: { type: 'bearer' } }),
        def({ inputSchema: 'not an object' }),
        def({ extra: true }),
      ];
      for (const body of bodies) assert.deepEqual(refusal(await create(body)), [400, 'invalid_request'], JSON.stringify(body).slice(0, 200));
      const res = await create(noMethod);
      assert.match(res.body.error.message, /\/method is required for http tools/);
    });

    it('keeps names unique per account: of 20 concurrent creates of one name exactly one wins', async () => {
      const name = `race_${randomBytes(4).toString('hex')}`;
      const results = await Promise.all(Array.from({ length: 20 }, () => create(def({ name }))));
      const statuses = results.map((r) => r.status).sort();
      assert.deepEqual(statuses, [201, ...Array(19).fill(409)]);
      for (const r of results.filter((r) => r.status === 409)) assert.equal(errorCode(r), 'name_conflict');
      assert.equal((await gw.request('GET', '/v1/tools/definitions', { key: a.key })).body.data.filter((t: any) => t.name === name).length, 1);

      assert.equal((await create(def({ name }), b.key)).status, 201, 'another account may use the name');
      const winner = results.find((r) => r.status === 201)!.body;
      await gw.request('DELETE', `/v1/tools/definitions/${winner.id}`, { key: a.key });
      assert.equal((await create(def({ name }))).status, 201, 'a deleted tool frees its name');
    });

    it("answers 404 for another account's tool and for ids that are not tool ids", async () => {
      const tool = await created(def());
      for (const id of [tool.id, tool.tool_id]) {
        assert.deepEqual(refusal(await gw.request('GET', `/v1/tools/definitions/${id}`, { key: b.key })), [404, 'not_found']);
        assert.deepEqual(refusal(await gw.request('DELETE', `/v1/tools/definitions/${id}`, { key: b.key })), [404, 'not_found']);
      }
      assert.equal((await gw.request('GET', `/v1/tools/definitions/${tool.id}`, { key: a.key })).status, 200, 'still there for its owner');
      for (const id of ['nope', 'tool_x', `custom:${tool.id}x`, '..%2Fkeys']) {
        assert.deepEqual(refusal(await gw.request('GET', `/v1/tools/definitions/${id}`, { key: a.key })), [404, 'not_found'], id);
      }
    });

    it('refuses the 101st tool of an account with 409 conflict', async () => {
      const c = await gw.account();
      for (let batch = 0; batch < 4; batch++) {
        const results = await Promise.all(Array.from({ length: 25 }, () => create(def(), c.key)));
        assert.ok(results.every((r) => r.status === 201));
      }
      const res = await create(def(), c.key);
      assert.deepEqual(refusal(res), [409, 'conflict']);
      assert.match(res.body.error.message, /at most 100 tools/);
      assert.equal((await gw.request('GET', '/v1/tools/definitions', { key: c.key })).body.data.length, 100);
    });

    it('needs an account key', async () => {
      assert.deepEqual(refusal(await gw.request('GET', '/v1/tools/definitions')), [401, 'unauthorized']);
      assert.deepEqual(refusal(await gw.request('POST', '/v1/tools/definitions', { body: def() })), [401, 'unauthorized']);
    });
  });

  describe('without TOOL_SECRET_KEY', () => {
    const bare = uniquePrefix('tools-nokey');
    let keyDir: string;
    let nokey: TestGateway;
    let key: string;
    let accountId: string;
    const outboundEnv = () => ({ OUTBOUND_CA_FILE: server.caFile, OUTBOUND_ALLOW_CIDRS: '127.0.0.1/32', OUTBOUND_ALLOWED_PORTS: String(server.port) });
    before(async () => {
      keyDir = mkdtempSync(path.join(os.tmpdir(), 'sy-tools-key-'));
      nokey = await new TestGateway(bare, { DATA_DIR: keyDir, TOOL_SECRET_KEY: '', ...outboundEnv() }).start();
      ({ key, id: accountId } = await nokey.account());
    });
    after(async () => {
      await nokey?.stop();
      await cleanupPrefix(bare);
      rmSync(keyDir, { recursive: true, force: true });
    });

    it('makes a key once under DATA_DIR, readable by its owner only, and seals and uses tool secrets with it', async () => {
      const file = path.join(keyDir, 'tool-secret.key');
      assert.equal(statSync(file).mode & 0o777, 0o600);
      assert.equal(Buffer.from(readFileSync(file, 'utf8').trim(), 'base64').length, 32);
      const token = `tok-${randomBytes(8).toString('hex')}`;
      const res = await nokey.request('POST', '/v1/tools/definitions', { body: def({ auth: { type: 'bearer', token } }), key });
      assert.equal(res.status, 201, res.text);
      const webhook = await nokey.request('POST', '/v1/tools/definitions', { body: def({ kind: 'webhook', method: 'POST' }), key });
      assert.equal(webhook.status, 201, webhook.text);
      assert.match(webhook.body.signing_secret, /^whsec_/);
      const [tool] = await nokey.services.tools.resolve(accountId, [res.body.tool_id]);
      const result = await nokey.services.tools.call(tool, { city: 'Lyon' });
      assert.equal(result.ok, true, JSON.stringify(result));
      assert.equal(server.at(new URL(res.body.url).pathname).at(-1)?.headers.authorization, `Bearer ${token}`);
    });

    it('answers a bad URL or schema with its 400 before anything about secrets', async () => {
      const auth = { type: 'bearer', token: 'abc' };
      assert.deepEqual(refusal(await nokey.request('POST', '/v1/tools/definitions', { body: def({ auth, url: server.url('/x').replace('https:', 'http:') }), key })), [400, 'invalid_url']);
      assert.deepEqual(refusal(await nokey.request('POST', '/v1/tools/definitions', { body: def({ auth, url: `https://10.1.2.3:${server.port}/x` }), key })), [400, 'url_blocked']);
      assert.deepEqual(refusal(await nokey.request('POST', '/v1/tools/definitions', { body: def({ auth, inputSchema: { type: 'nonsense' } }), key })), [400, 'invalid_schema']);
    });

    it('lets TOOL_SECRET_KEY win over the file, and refuses to start with a key that does not open the stored secrets', async () => {
      const envKey = randomBytes(32).toString('base64');
      const store = uniquePrefix('tools-envkey');
      const withEnv = await new TestGateway(store, { DATA_DIR: keyDir, TOOL_SECRET_KEY: envKey, ...outboundEnv() }).start();
      try {
        const acct = await withEnv.account();
        assert.equal((await withEnv.request('POST', '/v1/tools/definitions', { body: def({ auth: { type: 'bearer', token: 'abc' } }), key: acct.key })).status, 201);
      } finally {
        await withEnv.stop();
      }
      try {
        // Same store, no TOOL_SECRET_KEY: the file's key did not seal these secrets.
        await assert.rejects(new TestGateway(store, { DATA_DIR: keyDir, TOOL_SECRET_KEY: '', ...outboundEnv() }).start(), (err: Error) => /does not open the tool secrets.*TOOL_SECRET_KEY/s.test(err.message));
        // And the file's store refuses the environment's key.
        await assert.rejects(new TestGateway(bare, { DATA_DIR: keyDir, TOOL_SECRET_KEY: envKey, ...outboundEnv() }).start(), (err: Error) => /from TOOL_SECRET_KEY does not open/.test(err.message));
        // The right key still starts.
        await (await new TestGateway(store, { DATA_DIR: keyDir, TOOL_SECRET_KEY: envKey, ...outboundEnv() }).start()).stop();
      } finally {
        await cleanupPrefix(store);
      }
    });

    it('checks a store whose tool secrets predate the key check against one of them, and claims no check for a key that does not open it', async () => {
      const [sealedWith, other] = [randomBytes(32).toString('base64'), randomBytes(32).toString('base64')];
      const store = uniquePrefix('tools-oldstore');
      const redis = testRedis('test-tools');
      try {
        const first = await new TestGateway(store, { DATA_DIR: keyDir, TOOL_SECRET_KEY: sealedWith, ...outboundEnv() }).start();
        try {
          const acct = await first.account();
          assert.equal((await first.request('POST', '/v1/tools/definitions', { body: def({ auth: { type: 'bearer', token: 'abc' } }), key: acct.key })).status, 201);
        } finally {
          await first.stop();
        }
        // As a store written before gateways kept a key check.
        await redis.del(`${store}:tools:key-check`);
        await assert.rejects(
          new TestGateway(store, { DATA_DIR: keyDir, TOOL_SECRET_KEY: other, ...outboundEnv() }).start(),
          (err: Error) => /from TOOL_SECRET_KEY does not open the tool secrets.*key id/s.test(err.message),
        );
        assert.equal(await redis.exists(`${store}:tools:key-check`), 0, 'the wrong key claimed no check');
        await (await new TestGateway(store, { DATA_DIR: keyDir, TOOL_SECRET_KEY: sealedWith, ...outboundEnv() }).start()).stop();
        assert.equal(await redis.exists(`${store}:tools:key-check`), 1, 'the right key claimed it');
      } finally {
        redis.disconnect();
        await cleanupPrefix(store);
      }
    });
  });

  describe('ToolService', () => {
    const tools = () => gw.services.tools;
    const record = async (over: Record<string, unknown> = {}): Promise<ToolRecord> => {
      const tool = await created(def(over));
      return (await tools().resolve(a.id, [tool.tool_id]))[0];
    };

    it('resolves custom ids of the account in order; unknown, malformed and foreign ids are unknown_tool', async () => {
      const first = await created(def());
      const second = await created(def());
      const foreign = await created(def(), b.key);
      const resolved = await tools().resolve(a.id, [second.tool_id, first.tool_id]);
      assert.deepEqual(resolved.map((t) => t.id), [second.id, first.id]);
      assert.equal(resolved[0].account_id, a.id);
      assert.equal('secrets' in resolved[0], false);
      for (const bad of [foreign.tool_id, first.id, 'custom:nope', 'custom:tool_01J00000000000000000000000', 'builtin:search']) {
        await assert.rejects(tools().resolve(a.id, [first.tool_id, bad]), (err: any) => err.code === 'unknown_tool' && err.status === 400 && err.details.tool_id === bad);
      }
    });

    it('gives the LLM an OpenAI-style function spec', async () => {
      const tool = await record();
      assert.deepEqual(tools().llmTool(tool), { type: 'function', function: { name: tool.name, description: tool.description, parameters: weather } });
    });

    it('calls a GET tool with the arguments as query parameters and the bearer token in Authorization, at the registered URL', async () => {
      const token = `tok-${randomBytes(8).toString('hex')}`;
      const tool = await record({ auth: { type: 'bearer', token }, url: `${server.url(`/get/${n}`)}?units=metric` });
      const result = await tools().call(tool, JSON.stringify({ city: 'Paris', days: 3 }));
      assert.equal(result.ok, true, JSON.stringify(result));
      assert.deepEqual([result.tool_id, result.name, result.status, result.error], [`custom:${tool.id}`, tool.name, 200, null]);
      assert.ok(result.duration_ms >= 0);
      const [seen] = server.at(new URL(tool.url).pathname);
      assert.equal(seen.method, 'GET');
      assert.deepEqual(seen.query, { units: 'metric', city: 'Paris', days: '3' });
      assert.equal(seen.headers.authorization, `Bearer ${token}`);
      assert.equal(seen.body, '');
      assert.deepEqual(result.output, { echo: { method: 'GET', query: { units: 'metric', city: 'Paris', days: '3' }, body: '' } }, 'JSON answers come back parsed');
    });

    it('calls a POST tool with the arguments as a JSON body, and no Authorization without auth', async () => {
      const tool = await record({ method: 'POST' });
      const pathname = new URL(tool.url).pathname;
      server.script(pathname, { status: 201, headers: { 'content-type': 'text/plain' }, body: 'sunny' });
      const result = await tools().call(tool, { city: 'Oslo', days: 2 });
      assert.deepEqual([result.ok, result.status, result.output], [true, 201, 'sunny'], 'text answers come back as text');
      const [seen] = server.at(pathname);
      assert.deepEqual([seen.method, seen.headers['content-type'], JSON.parse(seen.body)], ['POST', 'application/json', { city: 'Oslo', days: 2 }]);
      assert.equal(seen.headers.authorization, undefined);
    });

    it('refuses arguments that fail the inputSchema with invalid_arguments, sending nothing', async () => {
      const tool = await record();
      const before = server.seen.length;
      for (const args of [{ days: 2 }, { city: 7 }, { city: 'Rome', extra: 1 }, '{not json', [1, 2], 'null']) {
        const result = await tools().call(tool, args);
        assert.equal(result.ok, false);
        assert.equal(result.error?.code, 'invalid_arguments', JSON.stringify(args));
        assert.equal(result.status, null);
      }
      const missing = await tools().call(tool, {});
      assert.match(missing.error!.message, /\/city must have required property 'city'|must have required property 'city'/);
      assert.equal(server.seen.length, before, 'no request reached the tool');
    });

    it("reports an error answer as ok:false with its status and body, and a redirect without following it", async () => {
      const tool = await record({ method: 'POST' });
      const pathname = new URL(tool.url).pathname;
      server.script(pathname, { status: 500, headers: { 'content-type': 'application/json' }, body: '{"error":"db down"}' });
      const failed = await tools().call(tool, { city: 'Lima' });
      assert.deepEqual([failed.ok, failed.status, failed.error?.code, failed.output], [false, 500, 'tool_failed', { error: 'db down' }]);

      const moved = await record({ method: 'POST' });
      const movedPath = new URL(moved.url).pathname;
      server.script(movedPath, { status: 302, headers: { location: server.url('/elsewhere') } });
      const redirected = await tools().call(moved, { city: 'Lima' });
      assert.deepEqual([redirected.ok, redirected.status, redirected.error?.code], [false, 302, 'tool_failed']);
      assert.equal(server.at('/elsewhere').length, 0, 'the redirect was not followed');
    });

    it('signs webhook tool calls so that standardwebhooks verifies them with the signing secret', async () => {
      const created_ = await created(def({ kind: 'webhook', method: 'POST' }));
      const [tool] = await tools().resolve(a.id, [created_.tool_id]);
      const result = await tools().call(tool, { city: 'Kyiv' });
      assert.equal(result.ok, true, JSON.stringify(result));
      const [seen] = server.at(new URL(tool.url).pathname);
      const headers = { 'webhook-id': String(seen.headers['webhook-id']), 'webhook-timestamp': String(seen.headers['webhook-timestamp']), 'webhook-signature': String(seen.headers['webhook-signature']) };
      const payload = new Webhook(created_.signing_secret).verify(seen.body, headers);
      assert.deepEqual(payload, { tool_id: created_.tool_id, name: tool.name, arguments: { city: 'Kyiv' } });
      assert.equal(seen.headers.authorization, undefined);
      assert.throws(() => new Webhook(`whsec_${randomBytes(24).toString('base64')}`).verify(seen.body, headers), 'another secret does not verify');
    });

    it('does not call a tool deleted after it was resolved', async () => {
      const tool = await record();
      await gw.request('DELETE', `/v1/tools/definitions/${tool.id}`, { key: a.key });
      const result = await tools().call(tool, { city: 'Rome' });
      assert.deepEqual([result.ok, result.error?.code], [false, 'unknown_tool']);
      assert.equal(server.at(new URL(tool.url).pathname).length, 0);
    });

    it('reports a secret sealed under a previous key id as unavailable, naming both key ids, and sends nothing', async () => {
      const tool = await record({ auth: { type: 'bearer', token: 'current' } });
      const previous = new SecretBox(randomBytes(32));
      const redis = testRedis('test-tools');
      try {
        // As if a store kept a tool from before a key change (the key check stops such a start; this is the call's own guard).
        const doc = JSON.parse(await redis.hget(`${prefix}:tool:${tool.id}`, 'doc') as string);
        doc.secrets.bearer_token = previous.seal('old', `${tool.id}:bearer_token`);
        await redis.hset(`${prefix}:tool:${tool.id}`, 'doc', JSON.stringify(doc));
      } finally {
        redis.disconnect();
      }
      const result = await tools().call(tool, { city: 'Rome' });
      assert.deepEqual([result.ok, result.status, result.error?.code], [false, null, 'unavailable']);
      assert.match(result.error!.message, new RegExp(`another TOOL_SECRET_KEY \\(key id ${previous.keyId}; this gateway's key has id [0-9a-f]{8}\\)`));
      assert.equal(server.at(new URL(tool.url).pathname).length, 0, 'nothing reached the tool');
    });

    it('reports a call aborted by its signal as aborted', async () => {
      const tool = await record();
      const result = await tools().call(tool, { city: 'Rome' }, { signal: AbortSignal.abort() });
      assert.deepEqual([result.ok, result.error?.code], [false, 'aborted']);
    });
  });
});
