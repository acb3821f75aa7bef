import assert from 'node:assert/strict';
import { LLM_KIND, createOpenAiEngine } from '../sdk/engines/openai/index.js';
import { CompletionBuilder } from '../sdk/engines/openai/completion-builder.js';
import type { EngineContext } from '../sdk/engines/types.js';

/**
 * The engine reads a stream's content chunks without JSON.parse once one of them showed where its
 * text sits (sdk/engines/openai/content-chunks.ts). That must never change what a stream gives:
 * here every stream is read by the engine and, as the reference, chunk by chunk through
 * JSON.parse and CompletionBuilder.addChunk, and the deltas and the output must be the same,
 * for the shapes servers send and for chunks made to look like the learnt one but not be it.
 */

/** What JSON.parse and the builder make of these chunks: the deltas and the output. */
function reference(datas: string[], model: string) {
  const builder = new CompletionBuilder(model);
  const deltas: string[] = [];
  for (const data of datas) {
    const delta = builder.addChunk(JSON.parse(data));
    if (delta) deltas.push(delta);
  }
  return { deltas, output: builder.result() };
}

/** What the engine makes of them, sent as one event stream (one read, or one read per chunk). */
async function throughEngine(datas: string[], model: string, oneReadPerChunk: boolean, text = `${datas.map((d) => `data: ${d}\n\n`).join('')}data: [DONE]\n\n`) {
  const pieces = oneReadPerChunk ? text.split(/(?<=\n\n)/) : [text];
  const fetch: typeof globalThis.fetch = async () =>
    new Response(
      new ReadableStream<Uint8Array>({
        start(c) {
          for (const p of pieces) c.enqueue(new TextEncoder().encode(p));
          c.close();
        },
      }),
      { headers: { 'content-type': 'text/event-stream' } },
    );
  const deltas: string[] = [];
  const ctx: EngineContext = { signal: new AbortController().signal, progress: () => {}, log: () => {}, output: (d) => void deltas.push(d), inputFile: () => Promise.reject(new Error('no files')) };
  const engine = createOpenAiEngine({ backendUrl: 'http://backend.invalid/v1', models: [model], fetch });
  const { extra } = await engine.handler(LLM_KIND, { model, messages: [{ role: 'user', content: 'hi' }] }, ctx);
  return { deltas, output: extra };
}

async function assertSame(datas: string[], what: string, model = 'asked-model') {
  const want = reference(datas, model);
  for (const oneReadPerChunk of [false, true]) assert.deepEqual(await throughEngine(datas, model, oneReadPerChunk), want, `${what} (${oneReadPerChunk ? 'a read per chunk' : 'one read'})`);
}

const chunk = (delta: Record<string, unknown>, over: Record<string, unknown> = {}, choice: Record<string, unknown> = {}) =>
  JSON.stringify({ id: 'c1', object: 'chat.completion.chunk', created: 7, model: 'served', choices: [{ index: 0, delta, logprobs: null, finish_reason: null, ...choice }], usage: null, ...over });
const words = (n: number) => Array.from({ length: n }, (_, i) => chunk({ content: i ? ` w${i}` : 'w0' }));

describe('OpenAI engine: content chunks read without parsing', () => {
  it('gives what parsing gives for the shapes servers stream', async () => {
    const finish = chunk({}, {}, { finish_reason: 'stop' });
    const usage = JSON.stringify({ id: 'c1', object: 'chat.completion.chunk', created: 7, model: 'served', choices: [], usage: { prompt_tokens: 3, completion_tokens: 9 } });
    await assertSame([chunk({ role: 'assistant', content: '' }), ...words(8), finish, usage], "OpenAI's order");
    // llama-server: keys in another order, the text first; no usage field.
    const llama = (c: string, model = 'gguf') => `{"choices":[{"finish_reason":null,"index":0,"delta":{"content":${JSON.stringify(c)}}}],"created":9,"id":"l","model":"${model}","object":"chat.completion.chunk"}`;
    await assertSame(['Hi', ' there', ' m', '', 'x'].map((c) => llama(c)), 'llama-server, an empty text');
    // The text learnt from is also the model id, which comes after it: only the text's place is learnt.
    await assertSame([llama('gguf'), llama('gguf', 'other'), llama('y', 'other')], 'a text equal to the model id');
    // Python's json.dumps: spaces after separators, non-ASCII escaped.
    const py = (c: string) => `{"id": "p", "choices": [{"index": 0, "delta": {"content": ${JSON.stringify(c).replace(/[^\x00-\x7f]/g, (ch) => `\\u${ch.charCodeAt(0).toString(16).padStart(4, '0')}`)}}, "finish_reason": null}], "model": "py"}`;
    await assertSame(['Gr', 'üße', ' a', 'é', ' b'].map(py), 'json.dumps with ensure_ascii');
    // Texts that need escapes, between plain ones.
    await assertSame(['a', ' "quoted"', ' b', 'back\\slash', ' c', 'line\nbreak', ' d', 'tab\t', '\u0001', ' 🌍', '\u2028'].map((c) => chunk({ content: c })), 'escapes');
    // A counter in every chunk: nothing repeats, everything is parsed.
    await assertSame(Array.from({ length: 10 }, (_, i) => chunk({ content: ` w${i}` }, { created: i })), 'a counter per chunk');
  });

  it('parses chunks made to look like the learnt one but carrying more than a text', async () => {
    const learnt = chunk({ content: 'x' });
    const [prefix, suffix] = [learnt.slice(0, learnt.indexOf('"x"') + 1), learnt.slice(learnt.indexOf('"x"') + 2)];
    const forged = (inner: string) => prefix + inner + suffix;
    await assertSame(
      [
        ...words(3),
        learnt,
        // The text closes the string and adds fields: a finish reason, tool calls, an error.
        forged('a","finish_reason":"length","content":"b'),
        forged(`a"},"finish_reason":null}],"model":"other","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"t","function":{"name":"f","arguments":"{}"}}],"content":"b`),
        forged('a\\"b'),
        ...words(2),
      ],
      'forged texts',
    );
    const failing = [...words(2), learnt, forged('a"}}],"error":{"message":"boom"},"choices":[{"index":0,"delta":{"content":"b')];
    assert.throws(() => reference(failing, 'm'), /failed mid-stream: boom/);
    await assert.rejects(throughEngine(failing, 'm', true), /failed mid-stream: boom/);
    // llama-server's error line carrying what looks like a content chunk is still an error.
    const errorLine = `${words(3).map((d) => `data: ${d}\n\n`).join('')}error: ${chunk({ content: ' w3' })}\n\ndata: [DONE]\n\n`;
    await assert.rejects(throughEngine([], 'm', true, errorLine), /failed mid-stream/);
  });

  it('keeps the model, tool calls, finish reason and usage of the chunks between learnt ones', async () => {
    const toolCall = chunk({ tool_calls: [{ index: 0, id: 'call_a', type: 'function', function: { name: 'look', arguments: '{}' } }] }, { model: 'switched' });
    const finishWithoutModel = JSON.stringify({ id: 'c1', choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] });
    await assertSame([...words(3), toolCall, ...words(2), finishWithoutModel], 'the model of the learnt chunks after another one');
    // Usage or a finish reason on content chunks, the same on two, another on a tool call between.
    const [u1, u2] = [{ prompt_tokens: 1, completion_tokens: 1 }, { prompt_tokens: 2, completion_tokens: 2 }];
    const call = (over: Record<string, unknown>, choice: Record<string, unknown> = {}) => chunk({ tool_calls: [{ index: 0, id: 'c', function: { name: 'f', arguments: '{}' } }] }, over, choice);
    await assertSame([chunk({ content: 'a' }, { usage: u1 }), chunk({ content: 'b' }, { usage: u1 }), call({ usage: u2 }), chunk({ content: 'c' }, { usage: u1 }), finishWithoutModel], 'usage');
    const withFragment = (content: string) => chunk({ content, tool_calls: [{ index: 0, function: { arguments: '1' } }] });
    await assertSame([call({}), withFragment('a'), withFragment('b'), withFragment('c')], 'a text and a tool call fragment in one chunk');
    await assertSame([chunk({ content: 'a' }, {}, { finish_reason: 'x' }), chunk({ content: 'b' }, {}, { finish_reason: 'x' }), call({}, { finish_reason: 'y' }), chunk({ content: 'c' }, {}, { finish_reason: 'x' })], 'finish reasons');
    await assertSame(
      [
        ...words(3),
        chunk({ tool_calls: [{ index: 0, id: 'call_a', type: 'function', function: { name: 'look', arguments: '{"q":' } }] }, { model: 'switched' }),
        ...words(2),
        chunk({ tool_calls: [{ index: 0, function: { arguments: '1}' } }] }),
        chunk({ content: ' end' }, { usage: { prompt_tokens: 1, completion_tokens: 2 } }),
        chunk({ content: ' two' }, {}, { finish_reason: 'tool_calls' }),
        ...words(2),
        JSON.stringify({ id: 'c1', choices: [{ index: 0, delta: { content: 'a' } }, { index: 1, delta: { content: 'b' } }], model: 'served' }),
        // A repeated key: JSON.parse keeps the last.
        '{"id":"c1","choices":[{"index":0,"delta":{"content":" w9","content":"dup"}}],"model":"served"}',
      ],
      'tool calls, model, usage and finish between content chunks',
    );
  });

  it('gives what parsing gives for random streams', async () => {
    let seed = 42;
    const random = (n: number) => ((seed = (seed * 1103515245 + 12345) % 2 ** 31), seed % n);
    const texts = ['w', ' w', '', '"', '\\', '\n', 'é', '🌍', '\u0000', 'served', 'a"b', '}', ']', ',', ':'];
    const shapes = [
      (t: string) => chunk({ content: t }),
      (t: string) => chunk({ content: t }),
      (t: string) => chunk({ content: t }),
      (t: string) => chunk({ role: 'assistant', content: t }),
      (t: string) => chunk({ content: t }, { model: `m${random(3)}` }),
      (t: string) => chunk({ content: t }, { usage: { prompt_tokens: 1, completion_tokens: random(9) } }),
      (t: string) => chunk({ content: t }, {}, { finish_reason: 'stop' }),
      (t: string) => chunk({ tool_calls: [{ index: random(2), id: `c${random(2)}`, function: { name: 'f', arguments: t } }] }),
    ];
    for (let stream = 0; stream < 150; stream++) {
      const datas = Array.from({ length: 1 + random(25) }, () => shapes[random(shapes.length)](texts[random(texts.length)] + texts[random(texts.length)]));
      await assertSame(datas, `random stream ${stream}: ${datas.join(' | ')}`);
    }
  });
});
