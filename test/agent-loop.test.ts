import assert from 'node:assert/strict';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { errorCode, type Res } from './helpers/harness.js';
import { BotFixture } from './helpers/bot-fixture.js';

/**
 * The agent loop end to end: bots on a real gateway whose LLM steps run as jobs on a real demo
 * LLM worker, calling a real HTTPS tool server through the SSRF guard.
 */
const SHOP = 'https://shop.example';
const refusal = (res: Res) => [res.status, errorCode(res)];

describe('agent loop', function () {
  this.timeout(30_000);
  const fx = new BotFixture('agent');
  let owner: { id: string; key: string };
  let weather: any;
  let bot: any;
  const invoke = (body: unknown, to = bot) => fx.invoke(to.id, body, { token: to.embedToken, origin: SHOP });

  before(async () => {
    await fx.start();
    owner = await fx.gw.account(10_000);
    weather = await fx.tool(owner.key, 'weather');
    bot = await fx.bot(owner.key, { tools: [weather.tool_id], systemPrompt: 'You answer questions about the weather.' });
  });
  after(() => fx.stop());

  it('answers 503 unavailable at once while no llm worker is connected, on invoke and on the socket, and writes nothing', async () => {
    assert.deepEqual(refusal(await invoke({ message: 'what is the weather in Paris?' })), [503, 'unavailable']);
    const socket = await fx.socket(bot.id, { token: bot.embedToken, origin: SHOP });
    socket.send({ type: 'message', text: 'what is the weather in Paris?' });
    assert.equal((await socket.next((f) => f.type === 'error')).code, 'unavailable');
    assert.equal(socket.frames.some((f) => f.type === 'conversation'), false, 'no conversation was started');
    socket.close();
    assert.equal((await fx.gw.stores.runs.list(owner.id, { limit: 10 })).runs.length, 0, 'no llm job was queued');
    assert.equal(fx.tools.at('/tools/weather').length, 0);
  });

  describe('with a demo llm worker', () => {
    before(() => fx.startLlmWorker());

    it("calls the tool with schema-valid arguments, answers from its result, lists the call in steps, and bills the bot's owner", async () => {
      const before = (await fx.gw.request('GET', '/v1/account', { key: owner.key })).body.credits;
      const calls = fx.tools.at('/tools/weather').length;
      const res = await invoke({ message: 'what is the weather in Paris?' });
      assert.equal(res.status, 200, res.text);
      const received = fx.tools.at('/tools/weather').slice(calls);
      assert.equal(received.length, 1);
      assert.equal(received[0].method, 'POST');
      const args = JSON.parse(received[0].body);
      assert.ok(new Ajv2020().validate(weather.inputSchema, args), `the tool got ${received[0].body}`);

      const [step] = res.body.steps;
      assert.equal(res.body.steps.length, 1);
      assert.deepEqual(
        { type: step.type, tool_id: step.tool_id, name: step.name, arguments: step.arguments, ok: step.ok, status: step.status, error: step.error },
        { type: 'tool_call', tool_id: weather.tool_id, name: 'weather', arguments: args, ok: true, status: 200, error: null },
      );
      assert.deepEqual(step.output, { echo: { method: 'POST', query: {}, body: received[0].body } });
      assert.match(step.llm_run_id, /^run_/);
      assert.match(res.body.reply, /^The tool returned/, 'the second LLM step answered from the tool result');
      const after = (await fx.gw.request('GET', '/v1/account', { key: owner.key })).body.credits;
      assert.equal(before - after, 2, 'two LLM steps at 1 credit each, paid by the owner');
    });

    it('continues a conversation by conversation_id, giving the LLM the earlier turns', async () => {
      const first = await invoke({ message: 'Tell me about lighthouses.' });
      assert.equal(first.status, 200, first.text);
      const id = first.body.conversation_id;
      const second = await invoke({ message: 'And about harbours?', conversation_id: id });
      assert.equal(second.status, 200, second.text);
      assert.equal(second.body.conversation_id, id);
      const latest = (await fx.gw.stores.runs.list(owner.id, { limit: 1 })).runs[0];
      assert.deepEqual(
        (latest.input.messages as any[]).map((m) => [m.role, m.content]),
        [
          ['system', 'You answer questions about the weather.'],
          ['user', 'Tell me about lighthouses.'],
          ['assistant', first.body.reply],
          ['user', 'And about harbours?'],
        ],
      );
      const stored = await fx.gw.stores.conversations.get(id);
      assert.equal(stored!.messages.length, 4);
    });

    it("refuses another bot's conversation with 404", async () => {
      const mine = await invoke({ message: 'hello' });
      const otherBot = await fx.bot(owner.key);
      assert.deepEqual(refusal(await invoke({ message: 'hello', conversation_id: mine.body.conversation_id }, otherBot)), [404, 'not_found']);
    });

    it('streams on the socket: conversation, the step, LLM text as deltas, then the reply', async () => {
      const socket = await fx.socket(bot.id, { token: bot.embedToken, origin: SHOP });
      socket.send({ type: 'message', text: 'weather in Oslo, please' });
      const reply = await socket.next((f) => f.type === 'reply');
      const types = socket.frames.map((f) => f.type);
      assert.equal(types[0], 'hello');
      assert.equal(types[1], 'conversation');
      assert.equal(types[2], 'step');
      assert.ok(types.indexOf('delta') > 2 && types.lastIndexOf('delta') < types.indexOf('reply'), types.join(' '));
      const conversation = socket.frames[1];
      assert.equal(reply.conversation_id, conversation.conversation_id);
      assert.equal(socket.frames.filter((f) => f.type === 'delta').map((f) => f.text).join(''), reply.reply, 'the deltas add up to the reply');
      assert.deepEqual(socket.frames[2].step, reply.steps[0]);
      assert.equal(reply.steps[0].name, 'weather');

      const mark = socket.frames.length;
      socket.send({ type: 'message', text: 'thanks!', conversation_id: reply.conversation_id });
      const again = await socket.next((f) => f.type === 'reply', mark);
      assert.equal(again.conversation_id, reply.conversation_id);
      assert.equal(socket.frames.slice(mark).some((f) => f.type === 'conversation'), false, 'a continued conversation is not announced again');
      socket.close();
    });

    it('runs without a tool deleted after the bot was created', async () => {
      const gone = await fx.tool(owner.key, 'tides');
      const tideBot = await fx.bot(owner.key, { tools: [gone.tool_id] });
      assert.equal((await fx.gw.request('DELETE', `/v1/tools/definitions/${gone.id}`, { key: owner.key })).status, 200);
      const res = await invoke({ message: 'what are the tides today?' }, tideBot);
      assert.equal(res.status, 200, res.text);
      assert.deepEqual(res.body.steps, []);
      assert.equal(fx.tools.at('/tools/tides').length, 0);
    });
  });
});

describe('agent loop bounded by AGENT_MAX_STEPS', function () {
  this.timeout(30_000);
  const fx = new BotFixture('agent-max', { AGENT_MAX_STEPS: '1' });
  let bot: any;

  before(async () => {
    await fx.start();
    await fx.startLlmWorker();
    const owner = await fx.gw.account(10_000);
    const weather = await fx.tool(owner.key, 'weather');
    bot = await fx.bot(owner.key, { tools: [weather.tool_id] });
  });
  after(() => fx.stop());

  it('stops a turn that uses its steps without an answer with 422 max_steps, listing the calls made', async () => {
    const res = await fx.invoke(bot.id, { message: 'weather in Rome?' }, { token: bot.embedToken, origin: SHOP });
    assert.deepEqual(refusal(res), [422, 'max_steps']);
    assert.equal(res.body.error.details.max_steps, 1);
    assert.equal(res.body.error.details.steps.length, 1);
    assert.equal(res.body.error.details.steps[0].name, 'weather');
    assert.equal(fx.tools.at('/tools/weather').length, 1, 'the tool was called once');
  });

  it('reports max_steps on the socket as an error frame and stays open', async () => {
    const socket = await fx.socket(bot.id, { token: bot.embedToken, origin: SHOP });
    socket.send({ type: 'message', text: 'weather in Rome?' });
    const error = await socket.next((f) => f.type === 'error');
    assert.equal(error.code, 'max_steps');
    assert.ok(socket.frames.some((f) => f.type === 'step'), 'the step was streamed before the stop');
    socket.send({ type: 'ping' });
    await socket.next((f) => f.type === 'pong');
    socket.close();
  });
});
