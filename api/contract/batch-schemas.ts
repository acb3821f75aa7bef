import { MAX_BATCH_JOBS } from '../../models/batch-types.js';
import { RUN_STATUSES } from '../../models/types.js';
import { jobAccepted } from './schemas.js';

/**
 * The batch routes' schemas (docs/api.md "Batches"). The body's items are checked one by one by
 * the service against the single submission's schema, so one bad job is reported by its index
 * rather than as a path deep in the array; the count is checked there too (`details.max`).
 */
export const submitBatchBody = {
  type: 'object',
  additionalProperties: false,
  required: ['jobs'],
  properties: {
    jobs: {
      type: 'array',
      minItems: 1,
      items: { type: 'object' },
      description: `The jobs, each the body of POST /v1/jobs (without file inputs); 1 to ${MAX_BATCH_JOBS}.`,
    },
  },
} as const;

const batchId = { type: 'string', pattern: '^batch_[0-9A-Z]{26}$' } as const;
const counts = { type: 'object', required: [...RUN_STATUSES], properties: Object.fromEntries(RUN_STATUSES.map((s) => [s, { type: 'integer', minimum: 0 }])) };

export const batch = {
  type: 'object',
  required: ['batch_id', 'created_at', 'size', 'price', 'counts', 'terminal'],
  properties: {
    batch_id: batchId,
    created_at: { type: 'string', format: 'date-time' },
    size: { type: 'integer', minimum: 1, description: 'Jobs in the batch.' },
    price: { type: 'integer', minimum: 0, description: 'Credits reserved for all of its jobs at submission.' },
    counts: { ...counts, description: 'Its jobs by status (jobs past retention are no longer counted).' },
    terminal: { type: 'boolean', description: 'Every job has ended.' },
  },
} as const;

export const batchAccepted = {
  type: 'object',
  required: ['batch_id', 'created_at', 'size', 'price', 'jobs'],
  properties: {
    batch_id: batchId,
    created_at: { type: 'string', format: 'date-time' },
    size: { type: 'integer', minimum: 1 },
    price: { type: 'integer', minimum: 0 },
    jobs: { type: 'array', items: jobAccepted, description: 'The accepted jobs, in the order of the request.' },
  },
} as const;

export const batchCanceled = {
  type: 'object',
  required: ['batch_id', 'canceled', 'cancel_requested', 'already_terminal'],
  properties: {
    batch_id: batchId,
    canceled: { type: 'integer', minimum: 0, description: 'Queued jobs canceled at once (credits returned).' },
    cancel_requested: { type: 'integer', minimum: 0, description: 'Running jobs whose workers were told to stop.' },
    already_terminal: { type: 'integer', minimum: 0, description: 'Jobs that had ended already.' },
  },
} as const;
