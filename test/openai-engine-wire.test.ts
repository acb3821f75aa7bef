import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { LLM_KIND, UpstreamError, createOpenAiEngine } from '../sdk/engines/openai/index.js';
import type { EngineContext } from '../sdk/engines/types.js';
import { until } from './helpers/harness.js';

/**
 * The openai engine's reading of the wire, below what openai-engine.test.ts covers: a stream in
 * any split of its bytes (UTF-8 characters, CRLF and a byte order mark included), an error line
 * in the middle of a stream, and what happens to the connection once `data: [DONE]` came.
 */

const input = { model: 'served-model', messages: [{ role: 'user', content: 'hi' }] };

function leaseContext() {
  const deltas: string[] = [];
  const ctx: EngineContext = { signal: new AbortController().signal, progress: () => {}, log: () => {}, output: (d) => void deltas.push(d), inputFile: () => Promise.reject(new Error('no files')) };
  return { ctx, deltas };
}

const chunk = (delta: Record<string, unknown>, extra: Record<string, unknown> = {}) =>
  JSON.stringify({ id: 'c1', object: 'chat.completion.chunk', created: 1, model: 'served-model', choices: [{ index: 0, delta, finish_reason: null }], ...extra });

/**
 * A recorded stream with everything a server may do to its framing: a byte order mark, CRLF, CR
 * and LF line ends, comments, a named event, a chunk's JSON over two data lines, characters of
 * two, three and four bytes, tool call fragments, the finishing chunk and the usage chunk.
 */
const RECORDED = Buffer.concat([
  Buffer.from([0xef, 0xbb, 0xbf]),
  Buffer.from(
    [
      `data: ${chunk({ role: 'assistant', content: 'Grüße ' })}\r\n\r\n`,
      ': keep-alive\r\n\r\n',
      `data:${chunk({ content: '🌍' })}\r\r`,
      `event: message\ndata: ${chunk({ content: ' 多\n' }).replace(',"choices"', ',\ndata: "choices"')}\n\n`,
      `data: ${chunk({ tool_calls: [{ index: 0, id: 'call_1', type: 'function', function: { name: 'look_up', arguments: '' } }] })}\n\n`,
      `data: ${chunk({ tool_calls: [{ index: 0, function: { arguments: '{"q": "é"}' } }] })}\r\n\r\n`,
      `data: ${JSON.stringify({ id: 'c1', object: 'chat.completion.chunk', created: 1, model: 'served-model', choices: [{ index: 0, delta: {}, finish_reason: 'tool_calls' }] })}\n\n`,
      `data: ${JSON.stringify({ id: 'c1', object: 'chat.completion.chunk', created: 1, model: 'served-model', choices: [], usage: { prompt_tokens: 5, completion_tokens: 7, total_tokens: 12 } })}\n\n`,
      'data: [DONE]\n\n',
    ].join(''),
  ),
]);
const WANT_DELTAS = ['Grüße ', '🌍', ' 多\n'];
const WANT_OUTPUT = {
  text: 'Grüße 🌍 多\n',
  tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'look_up', arguments: '{"q": "é"}' } }],
  finish_reason: 'tool_calls',
  usage: { prompt_tokens: 5, completion_tokens: 7, total_tokens: 12 },
  model: 'served-model',
};

/** A fetch answering every call with an event stream of these pieces of bytes, in this order. */
function fetchOf(pieces: Uint8Array[], calls: string[]): typeof fetch {
  return async (url) => {
    calls.push(String(url));
    const body = new ReadableStream<Uint8Array>({
      start(controller) {
        for (const piece of pieces) controller.enqueue(piece);
        controller.close();
      },
    });
    return new Response(body, { headers: { 'content-type': 'text/event-stream' } });
  };
}

/** A backend whose answers the test writes itself, counting the connections it was asked on. */
async function rawBackend(answer: (res: http.ServerResponse) => void) {
  const sockets: Socket[] = [];
  const server = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => answer(res));
  });
  server.on('connection', (s: Socket) => sockets.push(s));
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`,
    sockets,
    stop: () => {
      server.closeAllConnections();
      return new Promise((r) => server.close(r));
    },
  };
}

describe('OpenAI engine: the wire', () => {
  it('reads a stream split at any byte into the same deltas, tool calls and usage (through the fetch option)', async () => {
    const calls: string[] = [];
    const run = async (pieces: Uint8Array[], what: string) => {
      const engine = createOpenAiEngine({ backendUrl: 'http://backend.invalid/v1', models: ['served-model'], fetch: fetchOf(pieces, calls) });
      const { ctx, deltas } = leaseContext();
      const { extra } = await engine.handler(LLM_KIND, input, ctx);
      assert.deepEqual(deltas, WANT_DELTAS, what);
      assert.deepEqual(extra, WANT_OUTPUT, what);
    };
    for (let cut = 0; cut <= RECORDED.length; cut++) await run([RECORDED.subarray(0, cut), RECORDED.subarray(cut)], `split at byte ${cut}`);
    await run([...RECORDED].map((b) => Uint8Array.of(b)), 'one byte at a time');
    assert.equal(calls.length, RECORDED.length + 2, 'every call went through the given fetch');
    assert.equal(calls[0], 'http://backend.invalid/v1/chat/completions');
  });

  it("fails with the server's message on an error line mid-stream, after handing on what came before", async () => {
    const backend = await rawBackend((res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(`data: ${chunk({ content: 'Hi' })}\r\n\r\n`);
      res.write(': still here\r\n\r\nerr');
      res.end('or: {"message":"llama: out of memory","code":500}\r\n\r\n');
    });
    try {
      const engine = createOpenAiEngine({ backendUrl: backend.url, models: ['served-model'] });
      const { ctx, deltas } = leaseContext();
      await assert.rejects(engine.handler(LLM_KIND, input, ctx), (err: any) => {
        assert.ok(err instanceof UpstreamError, String(err));
        assert.equal(err.code, 'upstream_unavailable');
        assert.equal(err.retryable, true);
        assert.match(err.message, /failed mid-stream: llama: out of memory/);
        return true;
      });
      assert.deepEqual(deltas, ['Hi']);
    } finally {
      await backend.stop();
    }
  });

  it('completes at [DONE] without waiting for the end of the body, and asks again on the same connection', async () => {
    let endBody!: () => void;
    const backend = await rawBackend((res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(`data: ${chunk({ content: 'Hi' })}\n\ndata: [DONE]\n\n`);
      endBody = () => res.end();
    });
    try {
      const engine = createOpenAiEngine({ backendUrl: backend.url, models: ['served-model'] });
      for (let i = 0; i < 2; i++) {
        const { ctx, deltas } = leaseContext();
        const { extra } = await engine.handler(LLM_KIND, input, ctx);
        assert.deepEqual([deltas, extra?.text], [['Hi'], 'Hi'], 'done while the body was still open');
        endBody();
        const port = new URL(backend.url).port;
        await until('the connection is free again', async () => Object.keys(http.globalAgent.freeSockets).some((name) => name.includes(`:${port}:`)));
      }
      assert.equal(backend.sockets.length, 1, 'one connection for both completions');
    } finally {
      await backend.stop();
    }
  });

  it('closes a connection whose body goes on after [DONE]', async () => {
    const backend = await rawBackend((res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(`data: ${chunk({ content: 'Hi' })}\n\ndata: [DONE]\n\n: and then some\n\n`);
    });
    try {
      const engine = createOpenAiEngine({ backendUrl: backend.url, models: ['served-model'] });
      const { ctx } = leaseContext();
      assert.equal((await engine.handler(LLM_KIND, input, ctx)).extra?.text, 'Hi');
      await until('the client closes the connection', async () => backend.sockets.length === 1 && backend.sockets[0].destroyed);
    } finally {
      await backend.stop();
    }
  });
});
