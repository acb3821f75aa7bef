import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { LLM_KIND, UpstreamError, createOpenAiEngine } from '../sdk/engines/openai/index.js';
import { CompletionBuilder } from '../sdk/engines/openai/completion-builder.js';
import { SseReader } from '../sdk/engines/openai/sse.js';
import type { EngineContext } from '../sdk/engines/types.js';
import type { FailureReport } from '../sdk/protocol/index.js';
import { SwitchyardWorker } from '../sdk/worker/index.js';
import { silentLogger } from '../sdk/worker/logger.js';
import { TestGateway, cleanupPrefix, uniquePrefix, until } from './helpers/harness.js';
import { OpenAiUpstream, type RecordedRequest } from './helpers/openai-upstream.js';
import { SseClient } from './helpers/sse-client.js';

/**
 * The OpenAI engine (sdk/engines/openai) against a server speaking OpenAI's documented wire
 * format (test/helpers/openai-upstream.ts): alone, and as the handler of a real SDK worker
 * running jobs of a real gateway. The official `openai` SDK's view is in openai-engine-sdk.test.ts.
 */

const KEY = 'sk-backend-key';
const never = () => new Promise<void>(() => {});
const deferred = () => {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
};

/** A lease context as the worker SDK gives handlers, for calling the handler alone. */
function leaseContext(signal = new AbortController().signal) {
  const deltas: string[] = [];
  const ctx: EngineContext = { signal, progress: () => {}, log: () => {}, output: (d) => void deltas.push(d), inputFile: () => Promise.reject(new Error('no files')) };
  return { ctx, deltas };
}

/** An address where nothing listens (a server started, then stopped). */
async function deadUrl(): Promise<string> {
  const server = http.createServer().listen(0, '127.0.0.1');
  await new Promise((r) => server.once('listening', r));
  const { port } = server.address() as AddressInfo;
  await new Promise((r) => server.close(r));
  return `http://127.0.0.1:${port}/v1`;
}

const rejectsWith = (p: Promise<unknown>, code: string, retryable: boolean, message: RegExp) =>
  assert.rejects(p, (err: any) => {
    assert.ok(err instanceof UpstreamError, String(err));
    assert.equal(err.code, code);
    assert.equal(err.retryable, retryable);
    assert.match(err.message, message);
    return true;
  });

describe('OpenAI engine', () => {
  let upstream: OpenAiUpstream;
  before(async () => {
    upstream = await new OpenAiUpstream(['upstream-model', 'second-model'], KEY).start();
  });
  after(() => upstream.stop());

  describe('alone, against the backend', () => {
    it('reads SSE framing however the text is split: CRLF, CR, comments, multi-line data, llama.cpp error lines', () => {
      const wire = ': keep-alive\r\ndata: {"a":\r\ndata: 1}\r\n\r\nevent: note\rdata: x\r\rdata:y\n\nerror: {"message":"oom"}\n\ndata: [DONE]\n\n';
      const want = [{ event: 'message', data: '{"a":\n1}' }, { event: 'note', data: 'x' }, { event: 'message', data: 'y' }, { event: 'error', data: '{"message":"oom"}' }, { event: 'message', data: '[DONE]' }];
      for (let cut = 0; cut <= wire.length; cut++) {
        const reader = new SseReader();
        assert.deepEqual([...reader.feed(wire.slice(0, cut)), ...reader.feed(wire.slice(cut))], want, `split at ${cut}`);
      }
    });

    it("discovers the models from the backend's GET /models, with its key; given ids skip the backend", async () => {
      const engine = createOpenAiEngine({ backendUrl: `${upstream.url}/`, apiKey: KEY });
      assert.deepEqual(await engine.listModels(), [{ id: 'upstream-model' }, { id: 'second-model' }]);
      const asked = upstream.requests.at(-1)!;
      assert.equal(`${asked.method} ${asked.path}`, 'GET /v1/models');
      assert.equal(asked.headers.authorization, `Bearer ${KEY}`);
      const count = upstream.requests.length;
      assert.deepEqual(await createOpenAiEngine({ backendUrl: upstream.url, models: ['mine', 'mine', 'other'] }).listModels(), [{ id: 'mine' }, { id: 'other' }]);
      assert.equal(upstream.requests.length, count);
      assert.throws(() => createOpenAiEngine({ backendUrl: upstream.url, models: ['/abs/path.gguf'] }), /not a model id/);
      assert.throws(() => createOpenAiEngine({ backendUrl: 'ftp://x/v1' }), /http\(s\) URL/);
    });

    it('fails discovery clearly: unreachable, wrong key, nothing usable listed', async () => {
      await rejectsWith(createOpenAiEngine({ backendUrl: await deadUrl() }).listModels(), 'upstream_unavailable', true, /could not be reached \(GET \/models\): ECONNREFUSED/);
      await rejectsWith(createOpenAiEngine({ backendUrl: upstream.url, apiKey: 'wrong' }).listModels(), 'upstream_error', false, /answered GET \/models with 401: Incorrect API key provided\. \(invalid_request_error, invalid_api_key\)/);
      const saved = upstream.models;
      try {
        upstream.models = ['/models/7B/ggml.gguf'];
        await rejectsWith(createOpenAiEngine({ backendUrl: upstream.url, apiKey: KEY }).listModels(), 'upstream_bad_response', true, /none of its ids is a valid model id \(\/models\/7B\/ggml.gguf\).*--models/);
        upstream.models = [];
        await rejectsWith(createOpenAiEngine({ backendUrl: upstream.url, apiKey: KEY }).listModels(), 'upstream_bad_response', true, /it lists none/);
      } finally {
        upstream.models = saved;
      }
    });

    it('fails a job retryable when the backend is down, stays silent too long, cuts its stream or fails mid-stream', async () => {
      const input = { messages: [{ role: 'user', content: 'hi' }] };
      const dead = createOpenAiEngine({ backendUrl: await deadUrl(), models: ['m'] });
      await rejectsWith(dead.handler(LLM_KIND, input, leaseContext().ctx), 'upstream_unavailable', true, /could not be reached \(POST \/chat\/completions\)/);

      const engine = createOpenAiEngine({ backendUrl: upstream.url, apiKey: KEY, timeoutMs: 300 });
      upstream.reply = () => ({ content: ['Hi', never()] });
      const silent = leaseContext();
      await rejectsWith(engine.handler(LLM_KIND, input, silent.ctx), 'upstream_unavailable', true, /sent nothing for 300 ms/);
      assert.deepEqual(silent.deltas, ['Hi'], 'what came before the silence was streamed');
      await upstream.completions.at(-1)!.closed;
      assert.ok(upstream.completions.at(-1)!.aborted, 'the stalled request was aborted');

      upstream.reply = () => ({ content: ['Hi'], cut: 'drop' });
      await rejectsWith(engine.handler(LLM_KIND, input, leaseContext().ctx), 'upstream_unavailable', true, /answer to POST \/chat\/completions broke off/);
      upstream.reply = () => ({ content: ['Hi'], cut: 'end' });
      await rejectsWith(engine.handler(LLM_KIND, input, leaseContext().ctx), 'upstream_unavailable', true, /ended its stream before the completion finished/);
      upstream.reply = () => ({ content: ['Hi'], errorMidStream: { message: 'The server had an error while processing your request.', type: 'server_error' } });
      await rejectsWith(engine.handler(LLM_KIND, input, leaseContext().ctx), 'upstream_unavailable', true, /failed mid-stream: The server had an error/);
      // Servers' variants of a failure mid-stream, read the same way.
      assert.throws(() => new CompletionBuilder('m').addChunk({ object: 'error', message: 'CUDA out of memory', type: 'InternalServerError', code: 500 }), /failed mid-stream: CUDA out of memory/);
    });
  });

  describe('as the handler of a worker of a real gateway', () => {
    const prefix = uniquePrefix('openai-engine');
    let gw: TestGateway, worker: SwitchyardWorker, key: string;
    const failures: FailureReport[] = [];
    const submit = async (input: Record<string, unknown>) => {
      const res = await gw.submit(key, { kind: LLM_KIND, input });
      assert.equal(res.status, 202, res.text);
      return res.body.run_id as string;
    };
    const finished = (runId: string) => until(`${runId} ends`, async () => {
      const run = await gw.stores.runs.get(runId);
      return run && ['succeeded', 'failed', 'canceled'].includes(run.status) ? run : null;
    });
    /** The next chat completion the backend receives. */
    const nextRequest = async (): Promise<RecordedRequest> => {
      const seen = upstream.completions.length;
      return until('the backend is asked', async () => upstream.completions[seen]);
    };

    before(async () => {
      gw = await new TestGateway(prefix, { JOB_MAX_ATTEMPTS: '2' }).start();
      ({ key } = await gw.account(1000));
      const engine = createOpenAiEngine({ backendUrl: upstream.url, apiKey: KEY });
      const models = await engine.listModels();
      // `retired-model` is advertised but gone from the backend: its jobs reach the backend's 404.
      const advertised = [...models, { id: 'retired-model' }];
      worker = new SwitchyardWorker({ gateway: gw.url, token: await gw.workerToken(), kinds: [LLM_KIND], handler: engine.handler, models: { [LLM_KIND]: advertised }, logger: silentLogger });
      worker.on('failed', (_lease, error) => failures.push(error));
      await worker.start();
      assert.deepEqual(worker.models, { [LLM_KIND]: [{ id: 'upstream-model' }, { id: 'second-model' }, { id: 'retired-model' }] });
    });
    after(async () => {
      await worker?.stop({ timeoutMs: 0 });
      await gw?.stop();
      await cleanupPrefix(prefix);
    });

    it("streams each content delta into the job's events while the backend is still generating", async () => {
      const gate = deferred();
      upstream.reply = () => ({ content: ['Hel', 'lo', gate.promise, ' world'], usage: { prompt_tokens: 12, completion_tokens: 3 } });
      const asked = nextRequest();
      const messages = [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'greet me' }];
      const runId = await submit({ messages, max_tokens: 50, temperature: 0.2, top_p: 0.9 });
      const events = await new SseClient(`${gw.url}/v1/jobs/${runId}/events`, key).open();
      const deltas = () => events.frames.filter((f) => f.event === 'output').map((f) => f.data.delta);
      await events.until(() => deltas().length === 2);
      assert.deepEqual(deltas(), ['Hel', 'lo']);
      assert.equal((await gw.stores.runs.get(runId))!.status, 'running', 'the deltas came before the backend finished');
      gate.resolve();
      await events.until(() => events.frames.some((f) => f.event === 'done'));
      events.close();
      assert.deepEqual(deltas(), ['Hel', 'lo', ' world']);
      const run = await finished(runId);
      assert.equal(run.status, 'succeeded');
      assert.deepEqual(run.output, { urls: [], files: [], text: 'Hello world', finish_reason: 'stop', usage: { prompt_tokens: 12, completion_tokens: 3, total_tokens: 15 }, model: 'upstream-model' });

      const { body, headers } = await asked;
      assert.equal(headers.authorization, `Bearer ${KEY}`);
      assert.deepEqual(body, { model: 'upstream-model', messages, stream: true, stream_options: { include_usage: true }, max_tokens: 50, temperature: 0.2, top_p: 0.9 }, 'no model named: the first one');
    });

    it('assembles tool calls from fragments split across chunks and interleaved by index', async () => {
      upstream.reply = () => ({
        content: ['Checking.'],
        toolCalls: [
          { id: 'call_w', name: 'get_weather', arguments: ['{"ci', 'ty": "Pa', 'ris"}'] },
          { id: 'call_t', name: 'get_time', arguments: ['{"tz"', ': "CET"}'] },
        ],
        interleave: true,
        usage: { prompt_tokens: 30, completion_tokens: 20 },
      });
      const asked = nextRequest();
      // The job API's bare tool forms reach the backend as OpenAI's.
      const runId = await submit({ model: 'second-model', prompt: 'weather and time in Paris?', tools: [{ name: 'get_weather', inputSchema: { type: 'object' } }, 'get_time'], tool_choice: 'auto' });
      const run = await finished(runId);
      assert.equal(run.status, 'succeeded', JSON.stringify(run.error));
      assert.deepEqual(run.output!.tool_calls, [
        { id: 'call_w', type: 'function', function: { name: 'get_weather', arguments: '{"city": "Paris"}' } },
        { id: 'call_t', type: 'function', function: { name: 'get_time', arguments: '{"tz": "CET"}' } },
      ]);
      assert.equal(run.output!.text, 'Checking.');
      assert.equal(run.output!.finish_reason, 'tool_calls');
      assert.equal(run.output!.model, 'second-model');
      const { body } = await asked;
      assert.equal(body.model, 'second-model');
      assert.deepEqual(body.messages, [{ role: 'user', content: 'weather and time in Paris?' }]);
      assert.deepEqual(body.tools, [
        { type: 'function', function: { name: 'get_weather', parameters: { type: 'object' } } },
        { type: 'function', function: { name: 'get_time', parameters: { type: 'object', properties: {} } } },
      ]);
      assert.equal(body.tool_choice, 'auto');
    });

    it('fails retryable on 5xx and 429: the run is tried again, then fails with the backend’s message', async () => {
      for (const [status, type] of [[500, 'server_error'], [429, 'requests']] as const) {
        upstream.reply = () => ({ error: { status, message: `backend says ${status}`, type } });
        failures.length = 0;
        const before = upstream.completions.length;
        const run = await finished(await submit({ prompt: 'hi' }));
        assert.equal(upstream.completions.length - before, 2, `${status}: both attempts reached the backend`);
        // The worker's event follows the gateway's answer to its report, which may come after the run ended.
        await until('the worker hears both answers', async () => failures.length === 2);
        assert.deepEqual(failures.map((f) => [f.code, f.retryable]), [['upstream_unavailable', true], ['upstream_unavailable', true]]);
        assert.equal(run.status, 'failed');
        assert.equal(run.attempts, 2);
        assert.equal(run.error!.code, 'upstream_unavailable');
        assert.match(run.error!.message, new RegExp(`answered POST /chat/completions with ${status}: backend says ${status} \\(${type}\\)`));
      }
    });

    it('fails at once, not retryable, on a 4xx such as 400 or an unknown model (404)', async () => {
      upstream.reply = () => ({ error: { status: 400, message: "Invalid value for 'temperature'.", type: 'invalid_request_error', param: 'temperature', code: 'invalid_value' } });
      for (const [input, message] of [
        [{ prompt: 'hi' }, /with 400: Invalid value for 'temperature'\. \(invalid_request_error, invalid_value\)/],
        [{ prompt: 'hi', model: 'retired-model' }, /with 404: The model `retired-model` does not exist .* \(invalid_request_error, model_not_found\)/],
      ] as const) {
        failures.length = 0;
        const before = upstream.completions.length;
        const run = await finished(await submit(input));
        assert.equal(upstream.completions.length - before, 1, 'never tried again');
        await until('the worker hears the answer', async () => failures.length === 1);
        assert.deepEqual(failures.map((f) => [f.code, f.retryable]), [['upstream_error', false]]);
        assert.equal(run.status, 'failed');
        assert.equal(run.attempts, 1);
        assert.equal(run.error!.code, 'upstream_error');
        assert.match(run.error!.message, message);
      }
    });

    it('aborts the backend request at once when the job is canceled', async () => {
      upstream.reply = () => ({ content: ['Hello', never()] });
      const asked = nextRequest();
      const runId = await submit({ prompt: 'write forever' });
      const request = await asked;
      assert.equal(request.aborted, false);
      assert.equal((await gw.request('POST', `/v1/jobs/${runId}/cancel`, { key })).status, 200);
      await until('the backend sees its request aborted', async () => request.aborted);
      assert.equal((await finished(runId)).status, 'canceled');
    });
  });
});
