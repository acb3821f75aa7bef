import type { LlmRequest, LlmResult, LlmToolCall } from '../../services/llm/llm-runner.js';

/** What every object of one completion shares. */
export interface CompletionMeta {
  id: string;
  /** Unix seconds. */
  created: number;
  model: string;
}

export interface Usage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
}

type FinishReason = 'stop' | 'length' | 'tool_calls' | 'content_filter';

const FINISH_REASONS = new Set<string>(['stop', 'length', 'tool_calls', 'content_filter']);

/** The worker's finish reason when OpenAI knows it; otherwise what the result shows. */
export function finishReasonOf(result: LlmResult): FinishReason {
  if (result.tool_calls.length > 0) return 'tool_calls';
  return FINISH_REASONS.has(result.finish_reason) && result.finish_reason !== 'tool_calls' ? (result.finish_reason as FinishReason) : 'stop';
}

// Roughly four characters a token for English text with common tokenizers: an estimate, not a count.
const estimateTokens = (chars: number) => Math.ceil(chars / 4);

/**
 * The worker's token counts when it reported them. Otherwise an estimate from the length of
 * the prompt and the answer (docs/openai.md says so), because OpenAI clients expect a number.
 */
export function usageOf(request: LlmRequest, result: LlmResult): Usage {
  if (result.usage) return result.usage;
  const prompt = estimateTokens(JSON.stringify(request.messages).length + (request.tools ? JSON.stringify(request.tools).length : 0));
  const completion = estimateTokens(result.text.length + result.tool_calls.reduce((n, c) => n + c.function.name.length + c.function.arguments.length, 0));
  return { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion };
}

/** The `chat.completion` object of a finished step. */
export function completionOf(meta: CompletionMeta, request: LlmRequest, result: LlmResult) {
  const calls = result.tool_calls;
  const message: Record<string, unknown> = { role: 'assistant', content: calls.length > 0 && result.text === '' ? null : result.text };
  if (calls.length > 0) message.tool_calls = calls.map(({ id, type, function: f }) => ({ id, type, function: { name: f.name, arguments: f.arguments } }));
  return {
    id: meta.id,
    object: 'chat.completion',
    created: meta.created,
    model: meta.model,
    choices: [{ index: 0, message, finish_reason: finishReasonOf(result), logprobs: null }],
    usage: usageOf(request, result),
  };
}

/** One `chat.completion.chunk` with a single choice. */
export function chunkOf(meta: CompletionMeta, delta: Record<string, unknown>, finishReason: FinishReason | null = null) {
  return { id: meta.id, object: 'chat.completion.chunk', created: meta.created, model: meta.model, choices: [{ index: 0, delta, finish_reason: finishReason, logprobs: null }] };
}

/** The last chunk of a stream that asked for `stream_options.include_usage`: no choices, the usage. */
export function usageChunkOf(meta: CompletionMeta, usage: Usage) {
  return { id: meta.id, object: 'chat.completion.chunk', created: meta.created, model: meta.model, choices: [], usage };
}

/** Pieces of about this many characters; at least two, so clients' accumulation is always exercised. */
const FRAGMENT_CHARS = 64;

/**
 * Tool calls as stream deltas, the way OpenAI sends them: the first fragment of a call carries
 * `index`, `id`, `type` and `function.name`; the later ones only `index` and more `arguments`.
 */
export function toolCallDeltas(calls: LlmToolCall[]): Array<Record<string, unknown>> {
  return calls.flatMap((call, index) => {
    const args = call.function.arguments;
    const count = Math.max(2, Math.ceil(args.length / FRAGMENT_CHARS));
    const size = Math.ceil(args.length / count);
    return Array.from({ length: count }, (_, i) => {
      const piece = args.slice(i * size, (i + 1) * size);
      const fragment = i === 0 ? { index, id: call.id, type: 'function', function: { name: call.function.name, arguments: piece } } : { index, function: { arguments: piece } };
      return { tool_calls: [fragment] };
    });
  });
}
