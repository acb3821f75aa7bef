/**
 * The body of `POST /chat/completions` for one `inference:llm:text-generate` job. The job's input
 * is already OpenAI-shaped when it comes from the gateway's `/v1/chat/completions` or the agent
 * loop; a job submitted to `/v1/jobs` may also use `prompt` and the bare tool forms the demo
 * engine reads, which are turned into OpenAI's here, so every backend gets one dialect.
 */

/** Sampling and format fields the gateway passes through (docs/openai.md), forwarded as given. */
const FORWARDED = ['top_p', 'stop', 'seed', 'presence_penalty', 'frequency_penalty', 'response_format', 'parallel_tool_calls'] as const;

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** `messages` as given, then `prompt` as a last user message (both may be present, as for the demo engine). */
function messagesOf(input: Record<string, unknown>): unknown[] {
  const messages = Array.isArray(input.messages) ? input.messages.filter(isObject) : [];
  return typeof input.prompt === 'string' && input.prompt !== '' ? [...messages, { role: 'user', content: input.prompt }] : messages;
}

const EMPTY_SCHEMA = { type: 'object', properties: {} };

/**
 * OpenAI's `{type: 'function', function: {name, description?, parameters}}`, from that form or
 * the bare `{name, description?, parameters | inputSchema}` and plain names the job API accepts.
 */
function toolsOf(raw: unknown): unknown[] | undefined {
  if (!Array.isArray(raw) || raw.length === 0) return undefined;
  const tools = raw.flatMap((t) => {
    if (typeof t === 'string' && t !== '') return [{ type: 'function', function: { name: t, parameters: EMPTY_SCHEMA } }];
    if (!isObject(t)) return [];
    const f = isObject(t.function) ? t.function : t;
    if (typeof f.name !== 'string') return [];
    const { inputSchema, ...rest } = f;
    return [{ type: 'function', function: { ...rest, parameters: rest.parameters ?? inputSchema ?? EMPTY_SCHEMA } }];
  });
  return tools.length ? tools : undefined;
}

/** The request body, streaming with usage; `model` is the input's, or the engine's first when it names none. */
export function chatRequestOf(input: Record<string, unknown>, model: string): Record<string, unknown> {
  const body: Record<string, unknown> = {
    model,
    messages: messagesOf(input),
    stream: true,
    // Without it OpenAI (and vLLM, llama.cpp) send no token counts in a stream.
    stream_options: { include_usage: true },
  };
  const tools = toolsOf(input.tools);
  if (tools) body.tools = tools;
  // OpenAI refuses tool_choice without tools (400), whatever its value.
  if (tools && input.tool_choice != null) body.tool_choice = input.tool_choice;
  // `max_tokens` rather than OpenAI's newer `max_completion_tokens`: every compatible server reads it.
  if (typeof input.max_tokens === 'number') body.max_tokens = input.max_tokens;
  if (typeof input.temperature === 'number') body.temperature = input.temperature;
  for (const field of FORWARDED) if (input[field] != null) body[field] = input[field];
  return body;
}
