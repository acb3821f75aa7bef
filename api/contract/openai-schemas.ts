/**
 * JSON Schemas (2020-12) of the OpenAI-compatible surface. Like OpenAI, requests tolerate
 * fields they do not name, and optional fields may be null (several client libraries send
 * explicit nulls). The request schema validates; all of them feed the OpenAPI document.
 */
import { optionalRankFields } from './rank-schemas.js';
import { errorCode } from './schemas.js';

const nullable = (schema: object) => ({ anyOf: [schema, { type: 'null' }] });

const functionName = { type: 'string', pattern: '^[a-zA-Z0-9_-]{1,64}$', description: 'Letters, digits, _ and -, at most 64 (OpenAI\'s rule).' };
const maxTokens = { type: 'integer', minimum: 1, maximum: 1_000_000 };

const toolCall = {
  type: 'object',
  required: ['id', 'type', 'function'],
  properties: {
    id: { type: 'string' },
    type: { const: 'function' },
    function: { type: 'object', required: ['name', 'arguments'], properties: { name: { type: 'string' }, arguments: { type: 'string' } } },
  },
};

// Open objects are said to be open (additionalProperties: true), which JSON Schema assumes anyway:
// client generators close objects that do not say it, and would refuse OpenAI's other fields.
const message = {
  type: 'object',
  required: ['role'],
  additionalProperties: true,
  properties: {
    role: { enum: ['system', 'developer', 'user', 'assistant', 'tool', 'function'] },
    content: { anyOf: [{ type: 'string' }, { type: 'array', items: { type: 'object', required: ['type'], properties: { type: { type: 'string' } } } }, { type: 'null' }] },
    name: { type: 'string' },
    tool_calls: { type: 'array', items: toolCall },
    tool_call_id: { type: 'string' },
  },
  // A tool result must say which call it answers, or the model cannot pair them.
  if: { type: 'object', properties: { role: { const: 'tool' } } },
  then: { required: ['tool_call_id'], properties: { tool_call_id: { type: 'string' } } },
};

const tool = {
  type: 'object',
  required: ['type', 'function'],
  properties: {
    type: { const: 'function' },
    function: {
      type: 'object',
      required: ['name'],
      properties: { name: functionName, description: { type: 'string' }, parameters: { type: 'object', additionalProperties: true, description: 'JSON Schema of the arguments' }, strict: nullable({ type: 'boolean' }) },
    },
  },
};

export const chatCompletionBody = {
  type: 'object',
  required: ['model', 'messages'],
  additionalProperties: true,
  properties: {
    model: { type: 'string', minLength: 1, maxLength: 200, description: 'A model of GET /v1/models' },
    messages: { type: 'array', minItems: 1, maxItems: 1000, items: message },
    tools: nullable({ type: 'array', maxItems: 128, items: tool }),
    tool_choice: nullable({
      anyOf: [
        { enum: ['none', 'auto', 'required'] },
        { type: 'object', required: ['type', 'function'], properties: { type: { const: 'function' }, function: { type: 'object', required: ['name'], properties: { name: functionName } } } },
      ],
    }),
    parallel_tool_calls: nullable({ type: 'boolean' }),
    stream: nullable({ type: 'boolean' }),
    stream_options: nullable({ type: 'object', properties: { include_usage: { type: 'boolean' } } }),
    max_tokens: nullable(maxTokens),
    max_completion_tokens: nullable({ ...maxTokens, description: 'Wins over max_tokens when both are given' }),
    temperature: nullable({ type: 'number', minimum: 0, maximum: 2 }),
    top_p: nullable({ type: 'number', minimum: 0, maximum: 1 }),
    n: nullable({ type: 'integer', minimum: 1, maximum: 1, description: 'Only 1: one choice per request' }),
    stop: nullable({ anyOf: [{ type: 'string' }, { type: 'array', maxItems: 4, items: { type: 'string' } }] }),
    seed: nullable({ type: 'integer' }),
    presence_penalty: nullable({ type: 'number', minimum: -2, maximum: 2 }),
    frequency_penalty: nullable({ type: 'number', minimum: -2, maximum: 2 }),
    response_format: nullable({ type: 'object', required: ['type'], properties: { type: { enum: ['text', 'json_object', 'json_schema'] } } }),
    user: nullable({ type: 'string', description: 'Ignored' }),
  },
} as const;

const usage = {
  type: 'object',
  required: ['prompt_tokens', 'completion_tokens', 'total_tokens'],
  properties: { prompt_tokens: { type: 'integer' }, completion_tokens: { type: 'integer' }, total_tokens: { type: 'integer' } },
};

export const chatCompletion = {
  type: 'object',
  required: ['id', 'object', 'created', 'model', 'choices', 'usage'],
  properties: {
    id: { type: 'string', description: '`chatcmpl-` and the run id of the llm job' },
    object: { const: 'chat.completion' },
    created: { type: 'integer', description: 'Unix seconds' },
    model: { type: 'string' },
    choices: {
      type: 'array',
      items: {
        type: 'object',
        required: ['index', 'message', 'finish_reason', 'logprobs'],
        properties: {
          index: { const: 0 },
          message: {
            type: 'object',
            required: ['role', 'content'],
            properties: { role: { const: 'assistant' }, content: nullable({ type: 'string' }), tool_calls: { type: 'array', items: toolCall } },
          },
          finish_reason: { enum: ['stop', 'length', 'tool_calls', 'content_filter'] },
          logprobs: { type: 'null' },
        },
      },
    },
    usage,
  },
};

export const model = {
  type: 'object',
  required: ['id', 'object', 'created', 'owned_by'],
  properties: {
    id: { type: 'string' },
    object: { const: 'model' },
    created: { type: 'integer' },
    owned_by: { type: 'string' },
    // Switchyard's own, on ranked models only (docs/ranks.md).
    ...optionalRankFields,
  },
};

export const modelList = {
  type: 'object',
  required: ['object', 'data'],
  properties: { object: { const: 'list' }, data: { type: 'array', items: model } },
};

/** OpenAI's error envelope (api/http/openai/openai-error.ts): `code` and `details` are the gateway's. */
export const openAiError = {
  type: 'object',
  required: ['error'],
  properties: {
    error: {
      type: 'object',
      required: ['message', 'type', 'param', 'code'],
      properties: {
        message: { type: 'string' },
        type: { type: 'string', description: "OpenAI's error type: invalid_request_error, authentication_error, insufficient_quota, rate_limit_error, api_error, ..." },
        param: nullable({ type: 'string', description: 'The request field at fault, in OpenAI\'s notation (`messages[0].role`).' }),
        code: errorCode,
        details: { type: 'object', additionalProperties: true },
      },
    },
  },
} as const;
