/**
 * JSON Schemas (2020-12) of the tool routes: the body schema validates registrations and, with
 * the response schemas, feeds the OpenAPI document.
 */
export const TOOL_NAME_PATTERN = '^[A-Za-z0-9_-]{1,64}$';
export const TOOL_METHODS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'] as const;
export const TOOL_KINDS = ['http', 'webhook'] as const;

export const createToolBody = {
  type: 'object',
  additionalProperties: false,
  required: ['name', 'description', 'kind', 'url', 'inputSchema'],
  properties: {
    name: {
      type: 'string',
      pattern: TOOL_NAME_PATTERN,
      description: 'Unique per account; the function name the LLM sees, so letters, digits, `_` and `-`, at most 64.',
    },
    description: { type: 'string', minLength: 1, maxLength: 1000, description: 'What the tool does, for the LLM.' },
    kind: { enum: [...TOOL_KINDS], description: '`http`: called as described; `webhook`: POSTed `{tool_id, name, arguments}`, signed (Standard Webhooks).' },
    method: { enum: [...TOOL_METHODS], description: 'Required for `http` tools; `webhook` tools take only `POST` (the default).' },
    url: { type: 'string', minLength: 1, maxLength: 2048, description: 'https, no credentials, an allowed port, a public address (SSRF guard).' },
    inputSchema: { type: 'object', additionalProperties: true, description: 'JSON Schema (2020-12, strict) of the arguments; `type` must be `"object"`; at most 64 KiB.' },
    auth: {
      type: 'object',
      additionalProperties: false,
      required: ['type', 'token'],
      properties: {
        type: { const: 'bearer' },
        token: { type: 'string', minLength: 1, maxLength: 4096, pattern: '^[\\x21-\\x7e]+$', description: 'Sent as `Authorization: Bearer <token>`; stored encrypted, never returned.' },
      },
      description: '`http` tools only. The token is sealed with the gateway\'s tool secret key.',
    },
  },
} as const;

const toolProperties = {
  id: { type: 'string', pattern: '^tool_[0-9A-Z]{26}$' },
  tool_id: { type: 'string', pattern: '^custom:tool_[0-9A-Z]{26}$', description: 'The id bots and agents name the tool by.' },
  name: { type: 'string' },
  description: { type: 'string' },
  kind: { enum: [...TOOL_KINDS] },
  method: { enum: [...TOOL_METHODS] },
  url: { type: 'string' },
  inputSchema: { type: 'object', additionalProperties: true },
  auth: { anyOf: [{ type: 'object', required: ['type'], properties: { type: { const: 'bearer' } } }, { type: 'null' }], description: 'Never the token.' },
  created_at: { type: 'string', format: 'date-time' },
} as const;

export const tool = {
  type: 'object',
  required: Object.keys(toolProperties),
  properties: toolProperties,
} as const;

export const createdTool = {
  type: 'object',
  required: Object.keys(toolProperties),
  properties: {
    ...toolProperties,
    signing_secret: { type: 'string', pattern: '^whsec_', description: 'Webhook tools only, shown only now: verifies the calls (Standard Webhooks).' },
  },
} as const;

export const toolList = { type: 'object', required: ['data'], properties: { data: { type: 'array', items: tool, description: 'Oldest first.' } } } as const;
