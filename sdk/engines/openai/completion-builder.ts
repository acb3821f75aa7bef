import { UpstreamError } from '../upstream-error.js';

/** One tool call as the llm kind's output carries it (OpenAI's shape; `arguments` is JSON text). */
export interface ToolCall {
  id: string;
  type: 'function';
  function: { name: string; arguments: string };
}

export interface Usage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
}

/**
 * The output of an `inference:llm:text-generate` job, as the demo engine returns it and the
 * gateway's OpenAI surface and agent loop read it (api/services/llm/llm-runner.ts):
 * `tool_calls` only when there are some, `usage` only when the backend counted.
 */
export interface LlmOutput {
  text: string;
  tool_calls?: ToolCall[];
  finish_reason: string;
  usage?: Usage;
  model: string;
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const count = (v: unknown) => (typeof v === 'number' && Number.isFinite(v) && v >= 0 ? Math.round(v) : null);

/** A mid-stream `{error: {...}}` object (OpenAI, vLLM), as a retryable failure: the request itself was accepted. */
export function midStreamError(error: unknown): UpstreamError {
  const e = isObject(error) ? error : { message: String(error) };
  const message = typeof e.message === 'string' && e.message ? e.message : JSON.stringify(e);
  return new UpstreamError('upstream_unavailable', `the backend failed mid-stream: ${message}`, true);
}

/**
 * Builds the job's output from `chat.completion.chunk` objects, in order, as OpenAI streams
 * them: content deltas appended; tool calls assembled from fragments by `index` (id, type and
 * name in the first fragment of a call, `function.arguments` in pieces to concatenate, and
 * several calls' fragments possibly interleaved); `finish_reason` from the choice's last chunk;
 * `usage` from the last chunk that carries one (the `choices: []` chunk with
 * `stream_options.include_usage`; some servers put it on the finishing chunk instead).
 */
export class CompletionBuilder {
  private text = '';
  private readonly calls = new Map<number, { id: string; name: string; arguments: string }>();
  private usage: Usage | undefined;
  private model: string | undefined;
  finishReason: string | null = null;

  constructor(private readonly requestedModel: string) {}

  /** Reads one chunk; returns its text delta ('' when none). Throws on an error chunk. */
  addChunk(chunk: unknown): string {
    if (!isObject(chunk)) throw new UpstreamError('upstream_bad_response', 'the backend streamed a chunk that is not a JSON object', true);
    if (chunk.error !== undefined && chunk.error !== null) throw midStreamError(chunk.error);
    // Older vLLM sends its error response itself as a chunk: {object: "error", message, type, code}.
    if (chunk.object === 'error') throw midStreamError(chunk);
    if (typeof chunk.model === 'string' && chunk.model) this.model = chunk.model;
    this.addUsage(chunk.usage);
    const choices = Array.isArray(chunk.choices) ? chunk.choices.filter(isObject) : [];
    // One choice is asked for (no `n`); a server that numbers it reads as index 0.
    const choice = choices.find((c) => (c.index ?? 0) === 0);
    if (!choice) return '';
    if (typeof choice.finish_reason === 'string' && choice.finish_reason) this.finishReason = choice.finish_reason;
    const delta = isObject(choice.delta) ? choice.delta : isObject(choice.message) ? choice.message : {};
    if (Array.isArray(delta.tool_calls)) for (const fragment of delta.tool_calls) this.addToolFragment(fragment);
    const content = typeof delta.content === 'string' ? delta.content : '';
    this.text += content;
    return content;
  }

  /**
   * A chunk known to carry nothing but this text and `model` (content-chunks.ts), read without
   * parsing it: the same effect as addChunk on it.
   */
  addPlainContent(content: string, model: string | undefined): string {
    if (model !== undefined) this.model = model;
    this.text += content;
    return content;
  }

  /** A whole `chat.completion` (a backend that ignored `stream: true`): its message read like one chunk. */
  addCompletion(completion: unknown): string {
    return this.addChunk(completion);
  }

  private addUsage(raw: unknown): void {
    if (!isObject(raw)) return;
    const prompt = count(raw.prompt_tokens);
    const completion = count(raw.completion_tokens);
    if (prompt === null || completion === null) return;
    this.usage = { prompt_tokens: prompt, completion_tokens: completion, total_tokens: count(raw.total_tokens) ?? prompt + completion };
  }

  private addToolFragment(raw: unknown): void {
    if (!isObject(raw)) return;
    const fn = isObject(raw.function) ? raw.function : {};
    const id = typeof raw.id === 'string' ? raw.id : '';
    // Servers that leave out `index` send each call whole, or its fragments in a row: a new id
    // starts a new call, anything else continues the last one.
    let index = typeof raw.index === 'number' ? raw.index : undefined;
    if (index === undefined) {
      const last = Math.max(-1, ...this.calls.keys());
      index = last < 0 || (id && this.calls.get(last)!.id && this.calls.get(last)!.id !== id) ? last + 1 : last;
    }
    const call = this.calls.get(index) ?? { id: '', name: '', arguments: '' };
    this.calls.set(index, call);
    // Some servers repeat the id and name on every fragment: only the first one counts.
    if (id && !call.id) call.id = id;
    if (typeof fn.name === 'string' && fn.name && !call.name) call.name = fn.name;
    if (typeof fn.arguments === 'string') call.arguments += fn.arguments;
    else if (isObject(fn.arguments)) call.arguments += JSON.stringify(fn.arguments);
  }

  /** The job's output, once the stream has ended. */
  result(): LlmOutput {
    const toolCalls = [...this.calls.entries()]
      .sort(([a], [b]) => a - b)
      .filter(([, c]) => c.name !== '')
      // A call without arguments reads `{}`, as OpenAI sends it, so callers can always parse it.
      .map(([index, c]): ToolCall => ({ id: c.id || `call_${index}`, type: 'function', function: { name: c.name, arguments: c.arguments || '{}' } }));
    return {
      text: this.text,
      ...(toolCalls.length ? { tool_calls: toolCalls } : {}),
      finish_reason: this.finishReason ?? (toolCalls.length ? 'tool_calls' : 'stop'),
      ...(this.usage ? { usage: this.usage } : {}),
      model: this.model ?? this.requestedModel,
    };
  }
}
