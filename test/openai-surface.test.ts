import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { promisify } from 'node:util';
import OpenAI from 'openai';
import type { ChatCompletionChunk, ChatCompletionCreateParamsNonStreaming } from 'openai/resources/chat/completions';
import { createDemoEngine } from '../sdk/engines/demo/index.js';
import type { Engine } from '../sdk/engines/types.js';
import type { WorkerModels } from '../sdk/protocol/index.js';
import { silentLogger } from '../sdk/worker/logger.js';
import { SwitchyardWorker } from '../sdk/worker/switchyard-worker.js';
import { startDevFleet } from '../api/main/dev/dev-fleet.js';
import { LLM_KIND } from '../api/services/llm/llm-runner.js';
import { ADMIN_TOKEN, REDIS_URL, TestGateway, cleanupPrefix, uniquePrefix, until } from './helpers/harness.js';

interface HeldJob {
  release(): void;
  crash(message: string): void;
}

/**
 * A real engine whose jobs stream "Hello", then wait for the test to let them go on
 * (" world" and success) or fail: it shows what a client sees while a job is mid-way.
 */
function gatedEngine() {
  const held: HeldJob[] = [];
  const waiters: Array<(job: HeldJob) => void> = [];
  const engine: Engine = async (_kind, _input, ctx) => {
    ctx.output('Hello');
    await new Promise<void>((resolve, reject) => {
      const job = { release: resolve, crash: (message: string) => reject(Object.assign(new Error(message), { code: 'engine_error', retryable: false })) };
      const waiter = waiters.shift();
      if (waiter) waiter(job);
      else held.push(job);
      ctx.signal.addEventListener('abort', () => reject(Object.assign(new Error('aborted'), { name: 'AbortError' })), { once: true });
    });
    ctx.output(' world');
    return { artifacts: [], extra: { text: 'Hello world', finish_reason: 'stop' } };
  };
  /** The next job that has streamed its first delta and is waiting. */
  const next = (): Promise<HeldJob> => {
    const job = held.shift();
    return job ? Promise.resolve(job) : new Promise((resolve) => waiters.push(resolve));
  };
  return { engine, next };
}

async function contentOf(stream: AsyncIterable<ChatCompletionChunk>, chunks: ChatCompletionChunk[] = []): Promise<string> {
  let text = '';
  for await (const chunk of stream) {
    chunks.push(chunk);
    text += chunk.choices[0]?.delta?.content ?? '';
  }
  return text;
}

describe('OpenAI-compatible surface: /v1/chat/completions and /v1/models with the openai SDK', function () {
  const prefix = uniquePrefix('openai');
  let gw: TestGateway, client: OpenAI;
  let key: string, accountId: string, workerToken: string;
  const hello = { model: 'demo-llm', messages: [{ role: 'user' as const, content: 'tell me about lighthouses' }] };

  before(async () => {
    gw = await new TestGateway(prefix).start();
    ({ key, id: accountId } = await gw.account(1000));
    client = new OpenAI({ baseURL: `${gw.url}/v1`, apiKey: key, maxRetries: 0 });
    workerToken = (await gw.workerToken('open', 'llm'));
  });
  after(async () => {
    await gw.stop();
    await cleanupPrefix(prefix);
  });

  const startWorker = async (handler: Engine, models?: WorkerModels) => {
    const worker = new SwitchyardWorker({ gateway: gw.url, token: workerToken, kinds: [LLM_KIND], handler, logger: silentLogger, ...(models ? { models } : {}) });
    await worker.start();
    return worker;
  };

  describe('while no llm worker is connected', () => {
    it('answers 503 in OpenAI shape at once, streamed or not, and lists no models', async () => {
      for (const stream of [false, true]) {
        await assert.rejects(client.chat.completions.create({ ...hello, stream }), (err: any) => {
          assert.ok(err instanceof OpenAI.InternalServerError, String(err));
          assert.equal(err.status, 503);
          assert.equal(err.type, 'api_error');
          assert.equal(err.code, 'unavailable');
          assert.match(err.message, /no LLM worker is connected/);
          return true;
        });
      }
      assert.deepEqual((await client.models.list()).data, []);
      assert.equal((await gw.stores.runs.list(accountId, { limit: 5 })).runs.length, 0, 'no job was queued');
    });

    it("refuses a bad key with the SDK's AuthenticationError carrying our message", async () => {
      const stranger = new OpenAI({ baseURL: `${gw.url}/v1`, apiKey: 'sy_not-a-real-key', maxRetries: 0 });
      for (const call of [() => stranger.chat.completions.create(hello), () => stranger.models.list()]) {
        await assert.rejects(call(), (err: any) => {
          assert.ok(err instanceof OpenAI.AuthenticationError, String(err));
          assert.equal(err.type, 'authentication_error');
          assert.equal(err.code, 'unauthorized');
          assert.equal(err.param, null);
          assert.match(err.message, /API key/);
          assert.match(String(err.headers.get('www-authenticate')), /^Bearer/);
          return true;
        });
      }
    });

    it('refuses invalid bodies with BadRequestError naming the param, before looking for a worker', async () => {
      const cases: Array<[unknown, string, RegExp]> = [
        [{ model: 'demo-llm' }, 'messages', /messages/],
        [{ ...hello, n: 2 }, 'n', /\/n must be <= 1/],
        [{ ...hello, messages: [{ role: 'wizard', content: 'x' }] }, 'messages[0].role', /role/],
        [{ ...hello, messages: [{ role: 'tool', content: '42' }] }, 'messages[0].tool_call_id', /tool_call_id/],
        [{ ...hello, temperature: 3 }, 'temperature', /temperature/],
        [{ ...hello, stream_options: { include_usage: true } }, 'stream_options', /only allowed when stream is true/],
        [{ ...hello, tools: [{ type: 'function', function: { name: 'weather' } }], tool_choice: { type: 'function', function: { name: 'clock' } } }, 'tool_choice', /not among tools/],
      ];
      for (const [body, param, message] of cases) {
        await assert.rejects(client.chat.completions.create(body as ChatCompletionCreateParamsNonStreaming), (err: any) => {
          assert.ok(err instanceof OpenAI.BadRequestError, `${JSON.stringify(body)}: ${err}`);
          assert.equal(err.type, 'invalid_request_error');
          assert.equal(err.code, 'invalid_request');
          assert.equal(err.param, param, JSON.stringify(body));
          assert.match(err.message, message);
          return true;
        });
      }
    });

    it('tolerates fields it does not know and explicit nulls, as OpenAI does (reaching the worker check)', async () => {
      const res = await gw.request('POST', '/v1/chat/completions', { key, body: { ...hello, user: 'u1', logprobs: false, metadata: { a: 'b' }, n: null, temperature: null, tools: null } });
      assert.equal(res.status, 503, res.text);
    });

    it("answers unknown methods, sub-paths and unreadable bodies on its paths in OpenAI's shape, and leaves other routes alone", async () => {
      const wrongMethod = await gw.request('GET', '/v1/chat/completions', { key });
      assert.equal(wrongMethod.status, 405);
      assert.deepEqual(Object.keys(wrongMethod.body.error).sort(), ['code', 'message', 'param', 'type']);
      assert.equal(wrongMethod.body.error.type, 'invalid_request_error');
      const subPath = await gw.request('GET', '/v1/models/demo-llm/extra', { key });
      assert.equal(subPath.status, 404);
      assert.equal(subPath.body.error.type, 'invalid_request_error');
      assert.equal(subPath.body.error.code, 'not_found');
      const notJson = await gw.request('POST', '/v1/chat/completions', { key, raw: '{"model":', headers: { 'content-type': 'application/json' } });
      assert.equal(notJson.status, 400);
      assert.equal(notJson.body.error.type, 'invalid_request_error');
      const contract = await gw.request('GET', '/v1/jobs');
      assert.equal(contract.status, 401);
      assert.equal(contract.body.error.code, 'unauthorized');
      assert.equal(contract.body.error.type, undefined, 'the error envelope of docs/api.md elsewhere');
    });
  });

  describe('with an llm worker that advertises no model, mid-job', () => {
    let worker: SwitchyardWorker;
    const gate = gatedEngine();
    // A worker listing no model serves the kind's default queue: the model `default` reaches it.
    const hello = { model: 'default', messages: [{ role: 'user' as const, content: 'tell me about lighthouses' }] };
    before(async () => {
      worker = await startWorker(gate.engine);
    });
    after(async () => {
      await worker.stop({ timeoutMs: 0 });
    });

    it("lists it as the model 'default', which reaches it; a model the catalogue lacks is model_not_found", async () => {
      const list = await client.models.list();
      assert.deepEqual(list.data, [{ id: 'default', object: 'model', created: 0, owned_by: 'switchyard' }]);
      const pending = client.chat.completions.create(hello);
      (await gate.next()).release();
      const done = await pending;
      assert.equal(done.choices[0].message.content, 'Hello world');
      assert.equal(done.model, 'default', 'the requested model when the worker reports none');
      await assert.rejects(client.chat.completions.create({ model: 'any-model-at-all', messages: hello.messages }), (err: any) => {
        assert.ok(err instanceof OpenAI.NotFoundError, String(err));
        assert.equal(err.code, 'model_not_found');
        assert.equal(err.param, 'model');
        return true;
      });
    });

    it('estimates usage from the text lengths when the worker reports none', async () => {
      const pending = client.chat.completions.create(hello);
      (await gate.next()).release();
      const { usage } = await pending;
      assert.equal(usage!.completion_tokens, Math.ceil('Hello world'.length / 4));
      assert.equal(usage!.prompt_tokens, Math.ceil(JSON.stringify(hello.messages).length / 4));
      assert.equal(usage!.total_tokens, usage!.prompt_tokens + usage!.completion_tokens);
    });

    it('streams each delta as it arrives, while the job is still running', async () => {
      const { data: stream, response } = await client.chat.completions.create({ ...hello, stream: true }).withResponse();
      const runId = response.headers.get('x-switchyard-run-id')!;
      assert.match(runId, /^run_[0-9A-Z]{26}$/);
      assert.match(response.headers.get('content-type')!, /^text\/event-stream/);
      const chunks: ChatCompletionChunk[] = [];
      for await (const chunk of stream) {
        chunks.push(chunk);
        if (chunk.choices[0]?.delta?.content === 'Hello') break;
      }
      await gate.next(); // held, never released: the hang-up must end it
      assert.deepEqual(chunks[0].choices[0].delta, { role: 'assistant', content: '' });
      assert.equal(chunks[0].id, `chatcmpl-${runId}`);
      assert.equal((await gw.stores.runs.get(runId))!.status, 'running', 'the first words came before the job ended');
      // Leaving mid-stream cancels the job instead of paying for an answer nobody reads.
      await until('the abandoned job is canceled', async () => (await gw.stores.runs.get(runId))!.status === 'canceled');
    });

    it('delivers the whole stream once the job goes on, then [DONE]', async () => {
      const stream = await client.chat.completions.create({ ...hello, stream: true });
      const chunks: ChatCompletionChunk[] = [];
      const reading = contentOf(stream, chunks);
      (await gate.next()).release();
      assert.equal(await reading, 'Hello world');
      assert.deepEqual(chunks.map((c) => c.choices[0].delta.content), ['', 'Hello', ' world', undefined]);
      assert.equal(chunks.at(-1)!.choices[0].finish_reason, 'stop');
    });

    it('ends a stream that already started with an error frame the SDK throws', async () => {
      const stream = await client.chat.completions.create({ ...hello, stream: true });
      const chunks: ChatCompletionChunk[] = [];
      const reading = contentOf(stream, chunks);
      (await gate.next()).crash('the model ran out of memory');
      await assert.rejects(reading, (err: any) => {
        assert.ok(err instanceof OpenAI.APIError, String(err));
        assert.match(err.message, /the LLM step failed: the model ran out of memory/);
        assert.equal(err.type, 'api_error');
        assert.equal(err.code, 'unavailable');
        return true;
      });
      assert.equal(chunks.map((c) => c.choices[0].delta.content).join(''), 'Hello', 'what came before the error was delivered');
    });
  });

  describe('with the demo llm worker', () => {
    let worker: SwitchyardWorker;
    before(async () => {
      await until('the gated worker has left', async () => !(await gw.services.llm.models()).includes('default'));
      worker = await startWorker(createDemoEngine({ delayMs: 0 }), { [LLM_KIND]: [{ id: 'demo-llm' }] });
    });
    after(async () => {
      await worker.stop();
    });

    it('lists and retrieves the advertised model; an unknown one is NotFoundError', async () => {
      assert.deepEqual((await client.models.list()).data.map((m) => m.id), ['demo-llm']);
      assert.deepEqual(await client.models.retrieve('demo-llm'), { id: 'demo-llm', object: 'model', created: 0, owned_by: 'switchyard' });
      await assert.rejects(client.models.retrieve('gpt-4o'), OpenAI.NotFoundError);
      await assert.rejects(client.chat.completions.create({ ...hello, model: 'gpt-4o' }), (err: any) => {
        assert.ok(err instanceof OpenAI.NotFoundError, String(err));
        assert.equal(err.param, 'model');
        assert.match(err.message, /demo-llm/);
        return true;
      });
    });

    it('answers 503 at once for a known model no connected worker serves, queueing nothing', async () => {
      const declared = await gw.request('PUT', `/v1/admin/models/${encodeURIComponent(LLM_KIND)}/llama-70b`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` }, body: {} });
      assert.equal(declared.status, 201);
      const before = (await gw.stores.runs.list(accountId, { limit: 100 })).runs.length;
      await assert.rejects(client.chat.completions.create({ ...hello, model: 'llama-70b' }), (err: any) => {
        assert.equal(err.status, 503);
        assert.equal(err.code, 'unavailable');
        assert.match(err.message, /no connected worker serves the model "llama-70b"/);
        return true;
      });
      assert.equal((await gw.stores.runs.list(accountId, { limit: 100 })).runs.length, before);
      assert.deepEqual((await client.models.list()).data.map((m) => m.id), ['demo-llm'], 'only models served now are listed');
    });

    it('answers a chat.completion from one paid llm job, with the usage the worker reported', async () => {
      const before = (await gw.request('GET', '/v1/account', { key })).body.credits;
      const { data: done, response } = await client.chat.completions.create({ ...hello, user: 'someone' }).withResponse();
      const runId = response.headers.get('x-switchyard-run-id')!;
      assert.equal(done.id, `chatcmpl-${runId}`);
      assert.equal(done.object, 'chat.completion');
      assert.equal(done.model, 'demo-llm');
      assert.ok(Number.isInteger(done.created));
      assert.equal(done.choices.length, 1);
      const [choice] = done.choices;
      assert.equal(choice.index, 0);
      assert.equal(choice.message.role, 'assistant');
      assert.match(choice.message.content!, /^You asked about "tell me about lighthouses"\./);
      assert.equal(choice.message.tool_calls, undefined);
      assert.equal(choice.finish_reason, 'stop');
      assert.equal(choice.logprobs, null);
      const words = choice.message.content!.split(' ').length;
      assert.deepEqual(done.usage, { prompt_tokens: 4, completion_tokens: words, total_tokens: 4 + words });
      const run = await gw.stores.runs.get(runId);
      assert.equal(run!.kind, LLM_KIND);
      assert.equal(run!.status, 'succeeded');
      assert.equal((await gw.request('GET', '/v1/account', { key })).body.credits, before - 1, 'the llm price was charged');
    });

    it('streams the same content as the plain answer, and a usage chunk when asked', async () => {
      const plain = await client.chat.completions.create(hello);
      const chunks: ChatCompletionChunk[] = [];
      const streamed = await contentOf(await client.chat.completions.create({ ...hello, stream: true, stream_options: { include_usage: true } }), chunks);
      assert.equal(streamed, plain.choices[0].message.content);
      // The role chunk, the content (words sent together by the worker may share a chunk), the finish chunk, the usage chunk.
      assert.ok(chunks.length >= 4 && chunks.slice(1, -2).every((c) => (c.choices[0]?.delta?.content ?? '') !== ''), 'content chunks between the role and finish chunks');
      assert.ok(chunks.every((c) => c.object === 'chat.completion.chunk' && c.id === chunks[0].id));
      const usage = chunks.at(-1)!;
      assert.deepEqual(usage.choices, []);
      assert.deepEqual(usage.usage, plain.usage);
      assert.equal(chunks.at(-2)!.choices[0].finish_reason, 'stop');

      const withoutUsage: ChatCompletionChunk[] = [];
      await contentOf(await client.chat.completions.create({ ...hello, stream: true }), withoutUsage);
      assert.ok(withoutUsage.every((c) => c.choices.length === 1 && !c.usage), 'no usage chunk unless asked');
    });

    it("writes OpenAI's wire format: unnamed data frames of JSON, then data: [DONE]", async () => {
      const res = await fetch(`${gw.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'x-request-id': 'req-openai-1' },
        body: JSON.stringify({ ...hello, stream: true }),
      });
      assert.equal(res.status, 200);
      assert.equal(res.headers.get('x-request-id'), 'req-openai-1');
      assert.match(res.headers.get('cache-control')!, /no-cache/);
      const frames = (await res.text()).split('\n\n').filter((f) => f !== '' && !f.startsWith(':'));
      assert.equal(frames.at(-1), 'data: [DONE]');
      for (const frame of frames.slice(0, -1)) assert.equal(JSON.parse(frame.replace(/^data: /, '')).object, 'chat.completion.chunk');
    });

    it('stops at max_completion_tokens with finish_reason length', async () => {
      const done = await client.chat.completions.create({ ...hello, max_completion_tokens: 3 });
      assert.equal(done.choices[0].message.content!.split(' ').length, 3);
      assert.equal(done.choices[0].finish_reason, 'length');
    });

    it('returns tool calls, and streams them as fragments the SDK helper accumulates to the same call', async () => {
      const params = {
        model: 'demo-llm',
        messages: [{ role: 'user' as const, content: 'use tool get_weather for the city of Paris, please' }],
        tools: [{ type: 'function' as const, function: { name: 'get_weather', description: 'Weather now', parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } } }],
      };
      const plain = await client.chat.completions.create(params);
      const { message, finish_reason } = plain.choices[0];
      assert.equal(finish_reason, 'tool_calls');
      assert.equal(message.content, null);
      assert.equal(message.tool_calls!.length, 1);
      const call = message.tool_calls![0] as { id: string; type: string; function: { name: string; arguments: string } };
      assert.equal(call.type, 'function');
      assert.equal(call.function.name, 'get_weather');
      assert.equal(typeof JSON.parse(call.function.arguments).city, 'string');

      const runner = client.chat.completions.stream(params);
      const fragments: any[] = [];
      for await (const chunk of runner) fragments.push(...(chunk.choices[0]?.delta?.tool_calls ?? []));
      const final = await runner.finalChatCompletion();
      assert.deepEqual(final.choices[0].message.tool_calls, message.tool_calls);
      assert.equal(final.choices[0].finish_reason, 'tool_calls');
      assert.ok(fragments.length >= 2, 'the arguments arrive in several fragments');
      assert.deepEqual(Object.keys(fragments[0]).sort(), ['function', 'id', 'index', 'type']);
      for (const later of fragments.slice(1)) assert.deepEqual(Object.keys(later).sort(), ['function', 'index'], 'id, type and name on the first fragment only');
      assert.equal(fragments.map((f) => f.function.arguments).join(''), call.function.arguments);
    });

    it('answers 402 in OpenAI shape before any stream starts when the account cannot pay', async () => {
      const broke = await gw.account(0, 'broke');
      const poor = new OpenAI({ baseURL: `${gw.url}/v1`, apiKey: broke.key, maxRetries: 0 });
      for (const stream of [false, true]) {
        await assert.rejects(poor.chat.completions.create({ ...hello, stream }), (err: any) => {
          assert.ok(err instanceof OpenAI.APIError && err.status === 402, String(err));
          assert.equal(err.type, 'insufficient_quota');
          assert.equal(err.code, 'insufficient_credits');
          return true;
        });
      }
    });
  });

  describe('models advertised by the workers one starts', () => {
    const ids = async () => (await client.models.list()).data.map((m) => m.id);
    before(async () => {
      await until('the demo worker has left', async () => (await gw.services.llm.models()).length === 0);
    });

    it("the dev fleet of npm run dev serves 'demo-llm'", async () => {
      const fleet = await startDevFleet(gw.gateway, gw.url, 0);
      try {
        assert.deepEqual(await ids(), ['demo-llm']);
        assert.match((await client.chat.completions.create(hello)).choices[0].message.content!, /lighthouses/);
      } finally {
        await fleet.stop();
      }
      await until('the dev fleet has left', async () => (await ids()).length === 0);
    });

    it('`switchyard worker --models m1,m2` advertises those models; an empty list is a usage error', async function () {
      this.timeout(30_000); // CLI processes load the TypeScript sources
      const env = { ...process.env, REDIS_URL, LOG_LEVEL: 'warn', SWITCHYARD_WORKER_TOKEN: '' };
      const args = ['api/bin/switchyard.mjs', 'worker', '--gateway', gw.url, '--token', workerToken, '--kinds', LLM_KIND, '--demo-delay-ms', '0'];
      const child = spawn(process.execPath, [...args, '--models', 'llama-3-8b, qwen2'], { env, stdio: 'ignore' });
      const exited = new Promise<number | null>((resolve) => child.on('exit', resolve));
      try {
        await until('the CLI worker is registered', async () => (await ids()).length > 0, 20_000);
        assert.deepEqual(await ids(), ['llama-3-8b', 'qwen2']);
      } finally {
        child.kill('SIGTERM');
      }
      assert.equal(await exited, 0);
      const refused = await promisify(execFile)(process.execPath, [...args, '--models', ' , '], { env }).catch((e: { code: number; stderr: string }) => e);
      assert.equal((refused as { code: number }).code, 2);
      assert.match((refused as { stderr: string }).stderr, /--models is empty/);
    });
  });
});
