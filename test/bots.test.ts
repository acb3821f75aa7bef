import assert from 'node:assert/strict';
import { hashSecret } from '../models/credentials.js';
import { errorCode, type Res } from './helpers/harness.js';
import { BotFixture, UpgradeRefused } from './helpers/bot-fixture.js';

/**
 * Bots: the owner's CRUD, the gate of the bot surfaces (embed token from allowed origins, secure
 * mode's session tokens, the owner's key) and their rate limits, against a real gateway with a
 * demo LLM worker.
 */
describe('bots', function () {
  this.timeout(30_000);
  const fx = new BotFixture('bots', { BOT_RATE_PER_MIN: '4', BOT_CLIENT_RATE_PER_MIN: '2' });
  let owner: { id: string; key: string };
  let other: { id: string; key: string };
  const SHOP = 'https://shop.example';
  const hello = { message: 'hello there' };

  const refusal = (res: Res) => [res.status, errorCode(res)];

  before(async () => {
    await fx.start();
    await fx.startLlmWorker();
    owner = await fx.gw.account(10_000);
    other = await fx.gw.account(10_000);
  });
  after(() => fx.stop());

  describe('create, list, get, delete', () => {
    it('creates a bot with its published flow, embed token and absolute surface URLs', async () => {
      const tool = await fx.tool(owner.key, 'weather');
      const res = await fx.createBot(owner.key, {
        name: 'Shop helper',
        model: 'demo-llm',
        systemPrompt: 'You help shoppers.',
        tools: [tool.tool_id],
        greeting: 'Hi!',
        allowedOrigins: [SHOP, 'HTTP://LocalHost:3000', 'https://shop.example:443'],
      });
      assert.equal(res.status, 201, res.text);
      const bot = res.body;
      assert.match(bot.id, /^bot_[0-9A-Z]{26}$/);
      assert.equal(res.headers.get('location'), `/v1/bots/${bot.id}`);
      assert.deepEqual(
        { name: bot.name, model: bot.model, systemPrompt: bot.systemPrompt, tools: bot.tools, greeting: bot.greeting, secure: bot.secure },
        { name: 'Shop helper', model: 'demo-llm', systemPrompt: 'You help shoppers.', tools: [tool.tool_id], greeting: 'Hi!', secure: false },
      );
      assert.deepEqual(bot.allowedOrigins, [SHOP, 'http://localhost:3000'], 'origins are normalized and deduplicated');
      assert.match(bot.embedToken, /^sybot_[A-Za-z0-9_-]{32}$/);
      assert.match(bot.flow.id, /^flow_[0-9A-Z]{26}$/);
      assert.deepEqual({ status: bot.flow.status, version: bot.flow.version }, { status: 'published', version: 1 });
      const token = encodeURIComponent(bot.embedToken);
      assert.equal(bot.chatUrl, `${fx.gw.url}/v1/bots/${bot.id}/chat?token=${token}`);
      assert.equal(bot.invokeUrl, `${fx.gw.url}/v1/bots/${bot.id}/invoke`);
      assert.equal(bot.wsUrl, `${fx.gw.url.replace(/^http/, 'ws')}/v1/bots/${bot.id}/ws?token=${token}`);
      const flow = await fx.gw.stores.bots.getFlow(bot.flow.id);
      assert.deepEqual(flow!.definition, { type: 'single_agent', model: 'demo-llm', systemPrompt: 'You help shoppers.', tools: [tool.tool_id], maxSteps: 8 });
    });

    it("lists and gets the account's bots, and hides them from other accounts (404)", async () => {
      const a = await fx.bot(owner.key);
      const b = await fx.bot(owner.key, { name: 'second' });
      const listed = await fx.gw.request('GET', '/v1/bots', { key: owner.key });
      assert.equal(listed.status, 200);
      const ids = listed.body.data.map((x: any) => x.id);
      assert.ok(ids.indexOf(a.id) >= 0 && ids.indexOf(a.id) < ids.indexOf(b.id), 'oldest first');
      assert.deepEqual((await fx.gw.request('GET', `/v1/bots/${a.id}`, { key: owner.key })).body, a);
      assert.deepEqual((await fx.gw.request('GET', '/v1/bots', { key: other.key })).body.data, []);
      assert.deepEqual(refusal(await fx.gw.request('GET', `/v1/bots/${a.id}`, { key: other.key })), [404, 'not_found']);
      assert.deepEqual(refusal(await fx.gw.request('DELETE', `/v1/bots/${a.id}`, { key: other.key })), [404, 'not_found']);
      assert.deepEqual(refusal(await fx.gw.request('GET', '/v1/bots/bot_nope', { key: owner.key })), [404, 'not_found']);
    });

    it('deletes a bot: its token stops working at once', async () => {
      const bot = await fx.bot(owner.key);
      const res = await fx.gw.request('DELETE', `/v1/bots/${bot.id}`, { key: owner.key });
      assert.equal(res.status, 200, res.text);
      assert.equal(res.body.id, bot.id);
      assert.deepEqual(refusal(await fx.gw.request('GET', `/v1/bots/${bot.id}`, { key: owner.key })), [404, 'not_found']);
      assert.deepEqual(refusal(await fx.invoke(bot.id, hello, { token: bot.embedToken, origin: SHOP })), [404, 'not_found']);
      assert.deepEqual(refusal(await fx.gw.request('DELETE', `/v1/bots/${bot.id}`, { key: owner.key })), [404, 'not_found']);
    });

    it("refuses a tool id that is not one of the account's tools with 400 unknown_tool", async () => {
      const foreign = await fx.tool(other.key, 'stock');
      for (const id of [foreign.tool_id, 'custom:tool_01ARZ3NDEKTSV4RRFFQ69G5FAV', 'weather']) {
        const res = await fx.createBot(owner.key, { name: 'x', model: 'demo-llm', tools: [id] });
        assert.deepEqual(refusal(res), [400, 'unknown_tool'], id);
        assert.equal(res.body.error.details.tool_id, id);
      }
    });

    it('refuses a model the llm catalogue does not know with 400 unknown_model, and takes default', async () => {
      const res = await fx.createBot(owner.key, { name: 'x', model: 'gpt-7' });
      assert.deepEqual(refusal(res), [400, 'unknown_model']);
      assert.equal(res.body.error.details.path, '/model');
      assert.equal((await fx.createBot(owner.key, { name: 'x', model: 'default' })).status, 201);
    });

    it('refuses missing fields and allowedOrigins that are not origins, naming the field', async () => {
      const missing = await fx.createBot(owner.key, { model: 'demo-llm' });
      assert.deepEqual(refusal(missing), [400, 'invalid_request']);
      assert.equal(missing.body.error.details.errors[0].path, '/name');
      assert.deepEqual(refusal(await fx.createBot(owner.key, { name: 'x', model: 'demo-llm', colour: 'red' })), [400, 'invalid_request']);
      assert.deepEqual(refusal(await fx.createBot(owner.key, { name: 'x', model: 'demo-llm', secure: 'yes' })), [400, 'invalid_request']);
      for (const origin of ['https://shop.example/', 'https://shop.example/chat', 'shop.example', 'ftp://shop.example', '*', 'null', 'https://user@shop.example', 'https://shop.example?x=1', 'https://shop.example:99999']) {
        const res = await fx.createBot(owner.key, { name: 'x', model: 'demo-llm', allowedOrigins: [SHOP, origin] });
        assert.deepEqual(refusal(res), [400, 'invalid_request'], origin);
        assert.equal(res.body.error.details.errors[0].path, '/allowedOrigins/1', origin);
      }
    });
  });

  describe('who may use invokeUrl', () => {
    let bot: any;
    // A fresh bot each time: the bot-wide rate limit is small here.
    beforeEach(async () => {
      bot = await fx.bot(owner.key);
    });

    it('answers an allowed Origin with the embed token, with CORS headers for it', async () => {
      const res = await fx.invoke(bot.id, hello, { bearer: bot.embedToken, origin: SHOP });
      assert.equal(res.status, 200, res.text);
      assert.equal(res.headers.get('access-control-allow-origin'), SHOP);
      assert.match(res.headers.get('vary') ?? '', /Origin/);
      assert.match(res.body.conversation_id, /^conv_[0-9A-Z]{26}$/);
      assert.ok(res.body.reply.length > 0);
      assert.deepEqual(res.body.steps, []);
      const viaQuery = await fx.invoke(bot.id, hello, { token: bot.embedToken, origin: SHOP });
      assert.equal(viaQuery.status, 200, 'the token may come as ?token= too');
    });

    it('lets a browser on an allowed origin read a 400 about its body (CORS set before validation)', async () => {
      const res = await fx.invoke(bot.id, { message: 42 }, { bearer: bot.embedToken, origin: SHOP });
      assert.deepEqual(refusal(res), [400, 'invalid_request']);
      assert.equal(res.headers.get('access-control-allow-origin'), SHOP);
    });

    it("always allows the gateway's own origin (its chat page runs there)", async () => {
      const res = await fx.invoke(bot.id, hello, { token: bot.embedToken, origin: new URL(fx.gw.url).origin });
      assert.equal(res.status, 200, res.text);
    });

    it('refuses an Origin outside allowedOrigins with 403 and no CORS grant', async () => {
      const res = await fx.invoke(bot.id, hello, { token: bot.embedToken, origin: 'https://evil.example' });
      assert.deepEqual(refusal(res), [403, 'forbidden']);
      assert.equal(res.headers.get('access-control-allow-origin'), null);
    });

    it("refuses the embed token without an Origin (server-to-server): that takes the owner's key", async () => {
      assert.deepEqual(refusal(await fx.invoke(bot.id, hello, { token: bot.embedToken })), [403, 'forbidden']);
      const withKey = await fx.invoke(bot.id, hello, { bearer: owner.key });
      assert.equal(withKey.status, 200, withKey.text);
      const keyAnywhere = await fx.invoke(bot.id, hello, { bearer: owner.key, origin: 'https://evil.example' });
      assert.equal(keyAnywhere.status, 200, "the owner's key is not origin-checked");
      assert.equal(keyAnywhere.headers.get('access-control-allow-origin'), null, 'but that origin gets no CORS grant');
    });

    it("refuses missing and wrong tokens (401), and another account's key (404)", async () => {
      assert.deepEqual(refusal(await fx.invoke(bot.id, hello, { origin: SHOP })), [401, 'unauthorized']);
      assert.deepEqual(refusal(await fx.invoke(bot.id, hello, { token: 'sybot_wrong', origin: SHOP })), [401, 'unauthorized']);
      const otherBot = await fx.bot(owner.key);
      assert.deepEqual(refusal(await fx.invoke(bot.id, hello, { token: otherBot.embedToken, origin: SHOP })), [401, 'unauthorized']);
      assert.deepEqual(refusal(await fx.invoke(bot.id, hello, { bearer: other.key })), [404, 'not_found']);
      assert.deepEqual(refusal(await fx.invoke(bot.id, hello, { bearer: 'sy_notakey' })), [401, 'unauthorized']);
    });

    it('answers CORS preflights for allowed origins only', async () => {
      const ask = (origin: string) =>
        fx.gw.request('OPTIONS', `/v1/bots/${bot.id}/invoke`, { headers: { origin, 'access-control-request-method': 'POST', 'access-control-request-headers': 'authorization, content-type' } });
      const ok = await ask(SHOP);
      assert.equal(ok.status, 204);
      assert.equal(ok.headers.get('access-control-allow-origin'), SHOP);
      assert.match(ok.headers.get('access-control-allow-methods') ?? '', /POST/);
      assert.match(ok.headers.get('access-control-allow-headers') ?? '', /Authorization/i);
      const refused = await ask('https://evil.example');
      assert.deepEqual(refusal(refused), [403, 'forbidden']);
      assert.equal(refused.headers.get('access-control-allow-origin'), null);
    });

    it('refuses a bad body with 400 and an unknown conversation with 404', async () => {
      assert.deepEqual(refusal(await fx.invoke(bot.id, {}, { token: bot.embedToken, origin: SHOP })), [400, 'invalid_request']);
      assert.deepEqual(refusal(await fx.invoke(bot.id, { message: 'x'.repeat(8001) }, { token: bot.embedToken, origin: SHOP })), [400, 'invalid_request']);
      const unknown = await fx.invoke(bot.id, { message: 'hi', conversation_id: 'conv_01ARZ3NDEKTSV4RRFFQ69G5FAV' }, { token: bot.embedToken, origin: SHOP });
      assert.deepEqual(refusal(unknown), [404, 'not_found']);
    });
  });

  describe('secure mode', () => {
    let bot: any;
    before(async () => {
      bot = await fx.bot(owner.key, { secure: true });
    });

    it('refuses the bare embed token, and its URLs carry none', async () => {
      assert.equal(bot.secure, true);
      assert.equal(bot.chatUrl, `${fx.gw.url}/v1/bots/${bot.id}/chat`);
      assert.deepEqual(refusal(await fx.invoke(bot.id, hello, { token: bot.embedToken, origin: SHOP })), [401, 'unauthorized']);
    });

    it("accepts a session token minted with the owner's key, still from allowed origins only", async () => {
      const minted = await fx.gw.request('POST', `/v1/bots/${bot.id}/sessions`, { key: owner.key });
      assert.equal(minted.status, 201, minted.text);
      assert.match(minted.body.token, /^sybs_/);
      const lifetime = Date.parse(minted.body.expires_at) - Date.now();
      assert.ok(lifetime > 0 && lifetime <= 900_000, 'expires after BOT_SESSION_TTL_S');
      const res = await fx.invoke(bot.id, hello, { bearer: minted.body.token, origin: SHOP });
      assert.equal(res.status, 200, res.text);
      assert.deepEqual(refusal(await fx.invoke(bot.id, hello, { bearer: minted.body.token, origin: 'https://evil.example' })), [403, 'forbidden']);
      const elsewhere = await fx.bot(owner.key, { secure: true });
      assert.deepEqual(refusal(await fx.invoke(elsewhere.id, hello, { bearer: minted.body.token, origin: SHOP })), [401, 'unauthorized'], "another bot's session");
    });

    it('refuses expired and garbage session tokens, and minting for another account', async () => {
      const expired = 'sybs_expired-session-token-for-the-test';
      await fx.gw.stores.bots.createSession(hashSecret(expired), { bot_id: bot.id, expires_at: new Date(Date.now() - 1000).toISOString() });
      assert.deepEqual(refusal(await fx.invoke(bot.id, hello, { bearer: expired, origin: SHOP })), [401, 'unauthorized']);
      assert.deepEqual(refusal(await fx.invoke(bot.id, hello, { bearer: 'sybs_garbage', origin: SHOP })), [401, 'unauthorized']);
      assert.deepEqual(refusal(await fx.gw.request('POST', `/v1/bots/${bot.id}/sessions`, { key: other.key })), [404, 'not_found']);
    });
  });

  describe('rate limits (BOT_CLIENT_RATE_PER_MIN=2, BOT_RATE_PER_MIN=4)', () => {
    it('limits one client address, then the whole bot, with 429 and Retry-After', async () => {
      const bot = await fx.bot(owner.key);
      const from = (client: string) => fx.invoke(bot.id, hello, { token: bot.embedToken, origin: SHOP, client });
      assert.equal((await from('10.1.0.1')).status, 200);
      assert.equal((await from('10.1.0.1')).status, 200);
      const limited = await from('10.1.0.1');
      assert.deepEqual(refusal(limited), [429, 'rate_limited']);
      assert.ok(Number(limited.headers.get('retry-after')) >= 1);
      assert.equal(limited.body.error.details.scope, 'client');
      assert.equal(limited.headers.get('access-control-allow-origin'), SHOP, 'the page can read why');
      assert.equal((await from('10.1.0.2')).status, 200, 'another address has its own budget');
      assert.equal((await from('10.1.0.2')).status, 200);
      const botLimited = await from('10.1.0.3');
      assert.deepEqual(refusal(botLimited), [429, 'rate_limited']);
      assert.equal(botLimited.body.error.details.scope, 'bot');
    });

    it('counts each message on the bot socket', async () => {
      const bot = await fx.bot(owner.key);
      const socket = await fx.socket(bot.id, { token: bot.embedToken, origin: SHOP, client: '10.2.0.1' });
      for (let i = 0; i < 3; i++) socket.send({ type: 'message', text: `hello ${i}` });
      const error = await socket.next((f) => f.type === 'error');
      assert.equal(error.code, 'rate_limited');
      assert.equal(socket.frames.filter((f) => f.type === 'reply').length, 2);
      socket.send({ type: 'ping' });
      await socket.next((f) => f.type === 'pong');
      socket.close();
    });
  });

  describe('the bot socket upgrade', () => {
    let bot: any;
    before(async () => {
      bot = await fx.bot(owner.key, { greeting: 'Welcome to the shop!' });
    });

    it('greets with hello on open', async () => {
      const socket = await fx.socket(bot.id, { token: bot.embedToken, origin: SHOP });
      const first = await socket.next(() => true);
      assert.deepEqual(first, { type: 'hello', bot: { id: bot.id, name: bot.name }, greeting: 'Welcome to the shop!' });
      socket.close();
    });

    it('refuses an Origin outside allowedOrigins at the upgrade with 403 and the error envelope', async () => {
      const refused = await fx.socket(bot.id, { token: bot.embedToken, origin: 'https://evil.example' }).then(
        () => assert.fail('upgraded'),
        (err) => err,
      );
      assert.ok(refused instanceof UpgradeRefused, String(refused));
      assert.equal(refused.status, 403);
      assert.equal(refused.body.error.code, 'forbidden');
    });

    it('refuses a bad token with 401 and an unknown bot with 404', async () => {
      for (const [id, token, status] of [
        [bot.id, 'sybot_wrong', 401],
        ['bot_01ARZ3NDEKTSV4RRFFQ69G5FAV', bot.embedToken, 404],
      ] as const) {
        const refused = await fx.socket(id, { token, origin: SHOP }).then(
          () => assert.fail('upgraded'),
          (err) => err,
        );
        assert.ok(refused instanceof UpgradeRefused, String(refused));
        assert.equal(refused.status, status);
      }
    });

    it("accepts the owner's key without an Origin", async () => {
      const socket = await fx.socket(bot.id, { bearer: owner.key });
      assert.equal((await socket.next(() => true)).type, 'hello');
      socket.close();
    });

    it('answers bad messages with error frames and stays open', async () => {
      const socket = await fx.socket(bot.id, { token: bot.embedToken, origin: SHOP });
      socket.send('not json');
      socket.send({ type: 'shout' });
      socket.send({ type: 'message' });
      await socket.next(() => socket.frames.filter((f) => f.type === 'error').length >= 3);
      assert.deepEqual(
        socket.frames.filter((f) => f.type === 'error').map((f) => f.code),
        ['invalid_request', 'invalid_request', 'invalid_request'],
      );
      socket.send({ type: 'ping' });
      await socket.next((f) => f.type === 'pong');
      socket.close();
    });
  });
});

