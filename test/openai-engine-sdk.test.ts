import assert from 'node:assert/strict';
import OpenAI from 'openai';
import type { ChatCompletionChunk } from 'openai/resources/chat/completions';
import { LLM_KIND, createOpenAiEngine } from '../sdk/engines/openai/index.js';
import { SwitchyardWorker } from '../sdk/worker/index.js';
import { silentLogger } from '../sdk/worker/logger.js';
import { TestGateway, cleanupPrefix, uniquePrefix, until } from './helpers/harness.js';
import { OpenAiUpstream, type RecordedRequest } from './helpers/openai-upstream.js';

/**
 * End to end on a "real" model server: the official `openai` SDK calls the gateway's
 * /v1/chat/completions, the gateway runs an llm job, the SDK worker with the OpenAI engine runs
 * it on a server speaking OpenAI's wire format (test/helpers/openai-upstream.ts). What the
 * backend streams must come out of the gateway as OpenAI would have sent it.
 */

describe('OpenAI engine: the openai SDK through the gateway to an OpenAI-compatible backend', () => {
  const prefix = uniquePrefix('openai-engine-sdk');
  let upstream: OpenAiUpstream, gw: TestGateway, worker: SwitchyardWorker, client: OpenAI;
  const messages = [{ role: 'user' as const, content: 'tell me about lighthouses' }];
  const usage = { prompt_tokens: 17, completion_tokens: 4 };
  const weather = {
    model: 'llama-3.1-8b',
    messages: [{ role: 'user' as const, content: 'weather in Paris and Rome?' }],
    tools: [{ type: 'function' as const, function: { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } } }],
  };
  const calls = [
    { id: 'call_par', name: 'get_weather', arguments: ['{"city"', ': "Par', 'is"}'] },
    { id: 'call_rom', name: 'get_weather', arguments: ['{"city": ', '"Rome"}'] },
  ];
  const assembled = calls.map((c) => ({ id: c.id, type: 'function', function: { name: c.name, arguments: c.arguments.join('') } }));
  const nextRequest = async (): Promise<RecordedRequest> => {
    const seen = upstream.completions.length;
    return until('the backend is asked', async () => upstream.completions[seen]);
  };

  before(async () => {
    upstream = await new OpenAiUpstream(['llama-3.1-8b', 'qwen2.5-7b']).start();
    gw = await new TestGateway(prefix).start();
    const { key } = await gw.account(1000);
    client = new OpenAI({ baseURL: `${gw.url}/v1`, apiKey: key, maxRetries: 0 });
    const engine = createOpenAiEngine({ backendUrl: upstream.url });
    const models = await engine.listModels();
    worker = new SwitchyardWorker({
      gateway: gw.url,
      token: await gw.workerToken(),
      kinds: [LLM_KIND],
      handler: engine.handler,
      models: { [LLM_KIND]: models },
      logger: silentLogger,
    });
    await worker.start();
  });
  after(async () => {
    await worker?.stop({ timeoutMs: 0 });
    await gw?.stop();
    await upstream?.stop();
    await cleanupPrefix(prefix);
  });

  it("lists the backend's models", async () => {
    assert.deepEqual((await client.models.list()).data.map((m) => m.id), ['llama-3.1-8b', 'qwen2.5-7b']);
  });

  it("answers a plain completion with the backend's text, model and token counts", async () => {
    upstream.reply = () => ({ content: ['Lighthouses', ' guide', ' ships', '.'], usage });
    const asked = nextRequest();
    const done = await client.chat.completions.create({ model: 'qwen2.5-7b', messages, max_completion_tokens: 64, temperature: 0.5 });
    assert.equal(done.choices[0].message.content, 'Lighthouses guide ships.');
    assert.equal(done.choices[0].finish_reason, 'stop');
    assert.equal(done.model, 'qwen2.5-7b');
    assert.deepEqual(done.usage, { ...usage, total_tokens: 21 }, "the backend's counts, not the gateway's estimate");
    const { body } = await asked;
    assert.equal(body.model, 'qwen2.5-7b');
    assert.equal(body.max_tokens, 64);
    assert.equal(body.temperature, 0.5);
    assert.equal(body.stream, true, 'the engine always streams from the backend');
  });

  it('streams the backend’s pieces in order and whole, then the usage chunk', async () => {
    const pieces = ['Light', 'houses', ' guide', ' ships', '.'];
    upstream.reply = () => ({ content: pieces, usage });
    const chunks: ChatCompletionChunk[] = [];
    const stream = await client.chat.completions.create({ model: 'llama-3.1-8b', messages, stream: true, stream_options: { include_usage: true } });
    for await (const chunk of stream) chunks.push(chunk);
    assert.deepEqual(chunks[0].choices[0].delta, { role: 'assistant', content: '' });
    // The worker joins pieces that arrive while its previous output frame is unanswered
    // (docs/worker-protocol.md), so a chunk holds one piece or several consecutive ones, never a
    // part of one.
    const contents = chunks.slice(1).map((c) => c.choices[0]?.delta?.content).filter((c): c is string => typeof c === 'string' && c !== '');
    assert.equal(contents.join(''), pieces.join(''));
    let next = 0;
    for (const content of contents) {
      let joined = '';
      while (joined.length < content.length && next < pieces.length) joined += pieces[next++];
      assert.equal(joined, content, `a chunk is whole pieces in order: ${JSON.stringify(contents)}`);
    }
    assert.equal(chunks.at(-2)!.choices[0].finish_reason, 'stop');
    assert.deepEqual(chunks.at(-1)!.choices, []);
    assert.deepEqual(chunks.at(-1)!.usage, { ...usage, total_tokens: 21 });
  });

  it('delivers each piece to the SDK while the backend is still generating', async () => {
    let release!: () => void;
    upstream.reply = () => ({ content: ['First', new Promise<void>((r) => (release = r)), ' second'] });
    const stream = await client.chat.completions.create({ model: 'llama-3.1-8b', messages, stream: true });
    let text = '';
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta?.content ?? '';
      // The backend holds ' second' until the SDK has seen 'First': a buffered answer never gets here.
      if (text === 'First') release();
    }
    assert.equal(text, 'First second');
  });

  it('returns tool calls assembled from the backend’s fragments, plain and streamed', async () => {
    upstream.reply = () => ({ toolCalls: calls, interleave: true, usage });
    const plain = await client.chat.completions.create(weather);
    assert.equal(plain.choices[0].finish_reason, 'tool_calls');
    assert.equal(plain.choices[0].message.content, null);
    assert.deepEqual(plain.choices[0].message.tool_calls, assembled);
    assert.deepEqual(plain.usage, { ...usage, total_tokens: 21 });

    const runner = client.chat.completions.stream({ ...weather, stream_options: { include_usage: true } });
    const final = await runner.finalChatCompletion();
    assert.deepEqual(final.choices[0].message.tool_calls, assembled);
    assert.equal(final.choices[0].finish_reason, 'tool_calls');
    assert.deepEqual(final.usage, { ...usage, total_tokens: 21 });
  });

  it("passes a backend's refusal on as the step's failure", async () => {
    upstream.reply = () => ({ error: { status: 400, message: "This model's maximum context length is 8192 tokens.", type: 'invalid_request_error', code: 'context_length_exceeded' } });
    await assert.rejects(client.chat.completions.create({ model: 'llama-3.1-8b', messages }), (err: any) => {
      assert.ok(err instanceof OpenAI.APIError, String(err));
      assert.match(err.message, /maximum context length is 8192 tokens/);
      return true;
    });
  });

  it('a caller leaving mid-stream aborts the backend request', async () => {
    upstream.reply = () => ({ content: ['Once', new Promise<void>(() => {})] });
    const asked = nextRequest();
    const { data: stream, response } = await client.chat.completions.create({ model: 'llama-3.1-8b', messages, stream: true }).withResponse();
    for await (const chunk of stream) if (chunk.choices[0]?.delta?.content === 'Once') break;
    const request = await asked;
    await until('the backend sees its request aborted', async () => request.aborted);
    const runId = response.headers.get('x-switchyard-run-id')!;
    await until('the job is canceled', async () => (await gw.stores.runs.get(runId))?.status === 'canceled');
  });
});
