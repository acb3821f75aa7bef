/**
 * JSON Schemas (2020-12) of the bot routes: request schemas validate, and all of them feed the
 * OpenAPI document (api/contract/schemas.ts explains why both come from one object).
 */
const isoTime = { type: 'string', format: 'date-time' } as const;

/** Longest message a bot takes in one turn, in characters. */
export const BOT_MESSAGE_MAX_CHARS = 8000;

export const createBotBody = {
  type: 'object',
  additionalProperties: false,
  required: ['name', 'model'],
  properties: {
    name: { type: 'string', minLength: 1, maxLength: 100 },
    model: { type: 'string', minLength: 1, maxLength: 200, description: 'Model id the llm workers are asked for (see GET /v1/models).' },
    systemPrompt: { type: 'string', maxLength: 32768, default: '' },
    tools: {
      type: 'array',
      items: { type: 'string', minLength: 1, maxLength: 200 },
      maxItems: 32,
      uniqueItems: true,
      default: [],
      description: 'Tool ids of this account, `custom:<id>`; another id is 400 `unknown_tool`.',
    },
    greeting: { type: 'string', maxLength: 2000, default: '', description: 'Sent when a chat opens (the `hello` frame).' },
    allowedOrigins: {
      type: 'array',
      items: { type: 'string', minLength: 1, maxLength: 300 },
      maxItems: 50,
      default: [],
      description: 'Origins (`https://shop.example`, `http://localhost:3000`: scheme, host, port; no path) whose pages may use the embed token.',
    },
    secure: { type: 'boolean', default: false, description: 'Refuse the embed token; accept only session tokens from POST /v1/bots/{id}/sessions.' },
  },
} as const;

export const bot = {
  type: 'object',
  required: ['id', 'name', 'model', 'systemPrompt', 'tools', 'greeting', 'allowedOrigins', 'secure', 'embedToken', 'chatUrl', 'invokeUrl', 'wsUrl', 'flow', 'created_at'],
  properties: {
    id: { type: 'string', pattern: '^bot_[0-9A-Z]{26}$' },
    name: { type: 'string' },
    model: { type: 'string' },
    systemPrompt: { type: 'string' },
    tools: { type: 'array', items: { type: 'string' } },
    greeting: { type: 'string' },
    allowedOrigins: { type: 'array', items: { type: 'string' } },
    secure: { type: 'boolean' },
    embedToken: { type: 'string', description: 'Publishable: accepted only from allowedOrigins (and the gateway itself).' },
    chatUrl: { type: 'string', format: 'uri' },
    invokeUrl: { type: 'string', format: 'uri' },
    wsUrl: { type: 'string', format: 'uri' },
    flow: {
      type: 'object',
      required: ['id', 'status', 'version'],
      properties: { id: { type: 'string' }, status: { const: 'published' }, version: { type: 'integer', minimum: 1 } },
    },
    created_at: isoTime,
  },
} as const;

export const botList = { type: 'object', required: ['data'], properties: { data: { type: 'array', items: bot } } } as const;

export const botSession = {
  type: 'object',
  required: ['token', 'expires_at'],
  properties: { token: { type: 'string', description: 'Accepted where the embed token is (still from allowedOrigins only).' }, expires_at: isoTime },
} as const;

const messageText = { type: 'string', minLength: 1, maxLength: BOT_MESSAGE_MAX_CHARS } as const;
const conversationId = { type: 'string', pattern: '^conv_[0-9A-Z]{26}$', description: 'Continue this conversation (omit to start one).' } as const;

export const invokeBody = {
  type: 'object',
  additionalProperties: false,
  required: ['message'],
  properties: { message: messageText, conversation_id: conversationId },
} as const;

/** A `message` frame on the bot socket. */
export const socketMessage = {
  type: 'object',
  additionalProperties: false,
  required: ['type', 'text'],
  properties: { type: { const: 'message' }, text: messageText, conversation_id: conversationId },
} as const;

export const agentStep = {
  type: 'object',
  required: ['type', 'tool_id', 'name', 'arguments', 'ok', 'status', 'output', 'error', 'duration_ms', 'llm_run_id'],
  properties: {
    type: { const: 'tool_call' },
    tool_id: { type: ['string', 'null'] },
    name: { type: 'string' },
    arguments: {},
    ok: { type: 'boolean' },
    status: { type: ['integer', 'null'] },
    output: {},
    error: { anyOf: [{ type: 'object', required: ['code', 'message'], properties: { code: { type: 'string' }, message: { type: 'string' } } }, { type: 'null' }] },
    duration_ms: { type: 'integer', minimum: 0 },
    llm_run_id: { type: 'string' },
  },
} as const;

export const invokeReply = {
  type: 'object',
  required: ['conversation_id', 'reply', 'steps'],
  properties: { conversation_id: { type: 'string' }, reply: { type: 'string' }, steps: { type: 'array', items: agentStep } },
} as const;
