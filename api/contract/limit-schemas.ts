/** Concurrency limits and fair-share weights (docs/jobs.md, "Limits and fairness"): bodies and answers. */

const limit = { type: 'integer', minimum: 1, maximum: 100_000 } as const;
const nullableLimit = { anyOf: [limit, { type: 'null' }] } as const;
const byKind = {
  type: 'object',
  description: 'Runs of each kind the account may have running at once; null removes a kind\'s limit.',
  additionalProperties: nullableLimit,
} as const;

export const adminAccountLimitsBody = {
  type: 'object',
  additionalProperties: false,
  minProperties: 1,
  properties: {
    max_running: { ...nullableLimit, description: "Runs the account may have running at once; null: the deployment's default (ACCOUNT_MAX_RUNNING)." },
    max_running_by_kind: byKind,
    weight: { type: 'integer', minimum: 1, maximum: 1000, description: 'Jobs the account gets per round of its class (1 = an equal share).' },
  },
} as const;

export const accountLimitsBody = {
  type: 'object',
  additionalProperties: false,
  required: ['max_running_by_kind'],
  properties: { max_running_by_kind: byKind },
} as const;

export const keyLimitsBody = {
  type: 'object',
  additionalProperties: false,
  required: ['max_running'],
  properties: { max_running: { ...nullableLimit, description: "Runs of this key running at once; null: the deployment's default (KEY_MAX_RUNNING)." } },
} as const;

const keyLimits = {
  type: 'object',
  required: ['id', 'max_running'],
  properties: {
    id: { type: 'string' },
    max_running: { anyOf: [{ type: 'integer' }, { type: 'null' }], description: 'In force: its own, else the default; null: no limit.' },
  },
} as const;

export const accountLimits = {
  type: 'object',
  required: ['account_id', 'weight', 'max_running', 'max_running_by_kind', 'keys'],
  properties: {
    account_id: { type: 'string' },
    weight: { type: 'integer' },
    max_running: { anyOf: [{ type: 'integer' }, { type: 'null' }], description: "In force: the account's own, else the default; null: no limit." },
    max_running_by_kind: { type: 'object', additionalProperties: { type: 'integer' } },
    keys: { type: 'array', items: keyLimits, description: "The account's keys that are not revoked." },
  },
} as const;

export { keyLimits };
