import { ApiError } from '../../../models/errors.js';
import type { LlmRequest } from '../../services/llm/llm-runner.js';

type ToolChoice = 'none' | 'auto' | 'required' | { type: 'function'; function: { name: string } };

/** A body that passed `chatCompletionBody`; unnamed fields are tolerated and ignored. */
export interface ChatCompletionBody {
  model: string;
  messages: LlmRequest['messages'];
  tools?: Array<{ type: 'function'; function: { name: string; description?: string; parameters?: object; strict?: boolean | null } }> | null;
  tool_choice?: ToolChoice | null;
  stream?: boolean | null;
  stream_options?: { include_usage?: boolean } | null;
  max_tokens?: number | null;
  max_completion_tokens?: number | null;
  temperature?: number | null;
  [field: string]: unknown;
}

/** Sampling fields a worker may honour; forwarded as given. Others (user, logprobs, ...) are ignored. */
const FORWARDED = ['top_p', 'stop', 'seed', 'presence_penalty', 'frequency_penalty', 'response_format', 'parallel_tool_calls'] as const;

const invalid = (param: string, message: string) => new ApiError('invalid_request', message, { details: { param } });

/** Rules across fields, which a schema would state with unreadable messages; each names its param. */
export function checkChatRequest(body: ChatCompletionBody): void {
  if (body.stream_options != null && body.stream !== true) {
    throw invalid('stream_options', 'stream_options is only allowed when stream is true');
  }
  const names = new Set((body.tools ?? []).map((t) => t.function.name));
  if (names.size < (body.tools ?? []).length) throw invalid('tools', 'tools must have distinct function names');
  const choice = body.tool_choice;
  if (choice === 'required' && names.size === 0) throw invalid('tool_choice', 'tool_choice "required" needs tools');
  if (choice && typeof choice === 'object' && !names.has(choice.function.name)) {
    throw invalid('tool_choice', `tool_choice names ${JSON.stringify(choice.function.name)}, which is not among tools`);
  }
}

/**
 * The llm job's input. Only what the model needs goes in (never `stream`), so a streamed
 * and a plain request for the same messages are the same job input.
 */
export function toLlmRequest(body: ChatCompletionBody): LlmRequest {
  const request: LlmRequest & Record<string, unknown> = { model: body.model, messages: body.messages };
  if (body.tools?.length) {
    // OpenAI lets a function omit `parameters` (no arguments); workers get an explicit empty schema.
    request.tools = body.tools.map((t) => ({ type: 'function', function: { ...t.function, parameters: t.function.parameters ?? { type: 'object', properties: {} } } }));
  }
  if (body.tool_choice != null) request.tool_choice = body.tool_choice;
  const maxTokens = body.max_completion_tokens ?? body.max_tokens;
  if (maxTokens != null) request.max_tokens = maxTokens;
  if (body.temperature != null) request.temperature = body.temperature;
  for (const field of FORWARDED) if (body[field] != null) request[field] = body[field];
  return request;
}
