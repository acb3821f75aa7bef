/**
 * The JSON Schemas of usage-based cost (docs/jobs.md, "Cost"): a job's `cost` and `usage`, an
 * account's budget, the admin's budget body, and a kind's price in /v1/capabilities.
 */
const nullable = (schema: object) => ({ anyOf: [schema, { type: 'null' }] });
const credits = { type: 'integer', minimum: 0 } as const;
const count = { type: 'integer', minimum: 0 } as const;

/** What a worker reported it used (the `complete` frame's `usage`, docs/worker-protocol.md). */
export const usage = {
  type: 'object',
  additionalProperties: false,
  properties: {
    input_tokens: count,
    output_tokens: count,
    seconds: { type: 'number', minimum: 0, description: 'Seconds of output; charged per started second.' },
    images: count,
  },
} as const;

/** Spread into the job view. */
export const costViewFields = {
  cost: {
    type: 'object',
    required: ['reserved', 'charged'],
    properties: {
      reserved: { ...credits, description: 'Credits held at submission: the most the job can cost.' },
      charged: nullable({ ...credits, description: 'Credits taken when the run ended (0 unless it succeeded; never more than `reserved`, the rest returned). Null while it runs.' }),
    },
  },
  usage: nullable({ ...usage, description: 'What the worker reported the run used; null when it reported nothing (or has not finished).' }),
} as const;

export const accountBudget = nullable({
  type: 'object',
  required: ['monthly', 'period', 'spent'],
  description: "The account's monthly budget: a submission that would take `spent` + `reserved` past `monthly` gets 402 `budget_exceeded`. Null: none.",
  properties: {
    monthly: credits,
    period: { type: 'string', pattern: '^\\d{4}-\\d{2}$', description: 'This UTC calendar month.' },
    spent: { ...credits, description: 'Credits charged this month.' },
  },
});

export const adminBudgetBody = {
  type: 'object',
  additionalProperties: false,
  required: ['budget'],
  properties: { budget: nullable({ type: 'integer', minimum: 0, maximum: 1e15, description: 'Credits per UTC calendar month; null removes the budget.' }) },
} as const;

/** A kind's price in /v1/capabilities: a fixed number, or its per-unit rates. */
export const kindPrice = {
  type: 'object',
  required: ['base', 'max'],
  description: 'Credits: `base` for every succeeded job plus the per-unit rates of what it used, at most `max` (a fixed price: `base` = `max`, no rates). Submission reserves the most the input allows.',
  properties: {
    base: credits,
    max: credits,
    per_1k_input_tokens: credits,
    per_1k_output_tokens: credits,
    per_second: credits,
    per_image: credits,
    max_input_tokens: credits,
    max_output_tokens: credits,
    max_seconds: credits,
    max_images: credits,
  },
} as const;
