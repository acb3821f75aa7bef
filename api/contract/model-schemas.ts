import { KIND_NAMES } from '../../models/kinds.js';
import { MAX_MODEL_DESCRIPTION, MAX_MODEL_SCHEMA_BYTES, MODEL_ID_PATTERN } from '../../sdk/protocol/limits.js';
import { catalogueRankFields, middleRanks, ranks } from './rank-schemas.js';

/** JSON Schemas of the model catalogue's admin routes (docs/models.md); they validate and feed the OpenAPI document. */

const isoTime = { type: 'string', format: 'date-time' } as const;
const nullable = (schema: object) => ({ anyOf: [schema, { type: 'null' }] });

export const model = {
  type: 'object',
  required: ['object', 'kind', 'id', 'description', 'input_schema', 'ranks', 'middle_ranks', 'declared', 'first_seen', 'last_seen', 'created_at', 'updated_at'],
  properties: {
    object: { const: 'model' },
    kind: { type: 'string' },
    id: { type: 'string', pattern: MODEL_ID_PATTERN },
    description: nullable({ type: 'string' }),
    input_schema: nullable({ type: 'object', additionalProperties: true, description: "The model's input schema, extending its kind's; jobs naming the model are checked against it strictly" }),
    ...catalogueRankFields,
    declared: { type: 'boolean', description: 'Declared by an operator: workers advertising it change only `last_seen`' },
    first_seen: nullable({ ...isoTime, description: 'When a worker first advertised it; null if none has' }),
    last_seen: nullable({ ...isoTime, description: 'When a worker last advertised it; null if none has' }),
    created_at: isoTime,
    updated_at: { ...isoTime, description: 'When its description, schema, ranks, middle_ranks or `declared` last changed' },
  },
} as const;

export const modelList = { type: 'object', required: ['data'], properties: { data: { type: 'array', items: model } } } as const;

export const listModelsQuery = {
  type: 'object',
  additionalProperties: false,
  properties: { kind: { type: 'string', minLength: 1, maxLength: 100, description: `Only this kind's models. One of: ${KIND_NAMES.join(', ')}` } },
} as const;

export const declareModelBody = {
  type: 'object',
  additionalProperties: false,
  properties: {
    description: nullable({ type: 'string', maxLength: MAX_MODEL_DESCRIPTION }),
    input_schema: nullable({
      type: 'object',
      additionalProperties: true,
      description: `A JSON Schema (2020-12) extending the kind's input schema, at most ${MAX_MODEL_SCHEMA_BYTES / 1024} KiB as JSON (docs/models.md, "Declaring models")`,
    }),
    ranks: nullable({ ...ranks, description: 'Serve the model in this many ranks (pipeline stages); null or absent: whole. Workers advertising another count are refused (docs/ranks.md)' }),
    middle_ranks: nullable({ ...middleRanks, description: 'Ranked models only: `open` lets any worker hold the middle ranks of trusted jobs; absent or null: `trusted`' }),
  },
} as const;
