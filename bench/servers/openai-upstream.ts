import { OpenAiUpstream } from '../../test/helpers/openai-upstream.js';

/**
 * The mock OpenAI upstream of the stream benchmark's peer comparison: test/helpers/openai-upstream.ts
 * (written from OpenAI's API reference) serving the model MODEL (default `bench-model`), whose
 * streamed answers are `max_tokens` content chunks of one word each, written in one burst.
 * Prints {"url"} (the base URL, ending in /v1) once listening; SIGTERM stops it.
 */
const upstream = new OpenAiUpstream([process.env.MODEL ?? 'bench-model']);
upstream.reply = (body: { max_tokens?: number }) => {
  const n = body.max_tokens ?? 16;
  return { content: Array.from({ length: n }, (_, i) => (i === 0 ? 'w0' : ` w${i}`)), finishReason: 'length', usage: { prompt_tokens: 1, completion_tokens: n } };
};
await upstream.start();
// The helper records every request for the tests; a benchmark sends tens of thousands.
setInterval(() => upstream.requests.splice(0, upstream.requests.length), 1000).unref();
process.stdout.write(`${JSON.stringify({ url: upstream.url })}\n`);

process.once('SIGTERM', () => {
  void upstream.stop().finally(() => process.exit(0));
});
