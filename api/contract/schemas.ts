import { JOB_CLASSES, KIND_NAMES, OUTPUT_COMMON_PROPERTIES, TIERS } from '../../models/kinds.js';
import { ERROR_STATUS, type ErrorCode } from '../../models/errors.js';
import { RUN_STATUSES, WEBHOOK_EVENTS } from '../../models/types.js';
import { deadlineFields, deadlineViewFields } from './deadline-schemas.js';
import { attemptFields, attemptHistory, attemptViewFields, runError } from './attempt-schemas.js';
import { jobAttestation } from './attestation-schemas.js';
import { rankFields, waitingRanks } from './rank-schemas.js';
import { accountBudget, costViewFields, kindPrice } from './cost-schemas.js';

/**
 * JSON Schemas (2020-12) of the public API. Request schemas validate bodies and queries;
 * all of them, responses included, feed the OpenAPI document, so the two cannot drift.
 */
const isoTime = { type: 'string', format: 'date-time' } as const;
const nullable = (schema: object) => ({ anyOf: [schema, { type: 'null' }] });

// Free-form objects (JSON Schemas, details) say `additionalProperties: true`, which JSON Schema
// assumes anyway: client generators type an object that does not say it as an empty one.
// Named once and shared by reference, so the OpenAPI document shows each as one component
// (api/http/openapi/components.ts).
export const kindName = { type: 'string', enum: [...KIND_NAMES], description: 'A kind of the catalogue (docs/api.md, "Kinds").' } as const;
export const runStatus = { type: 'string', enum: [...RUN_STATUSES] } as const;
export const jobClass = { type: 'string', enum: [...JOB_CLASSES], description: 'Scheduling class: interactive before standard before batch.' } as const;
export const confidentiality = {
  type: 'string',
  enum: [...TIERS],
  description: 'The weakest worker tier the job may run on (docs/confidentiality.md).',
} as const;
export const errorCode = {
  type: 'string',
  enum: Object.keys(ERROR_STATUS) as ErrorCode[],
  description: 'The error codes of docs/api.md, "Errors"; each comes with one HTTP status.',
} as const;

export const errorEnvelope = {
  type: 'object',
  required: ['error'],
  properties: {
    error: {
      type: 'object',
      required: ['code', 'message'],
      properties: { code: errorCode, message: { type: 'string' }, details: { type: 'object', additionalProperties: true } },
    },
  },
} as const;

export const submitJobBody = {
  type: 'object',
  additionalProperties: false,
  required: ['kind', 'input'],
  properties: {
    kind: { type: 'string', minLength: 1, maxLength: 100, description: `One of: ${KIND_NAMES.join(', ')}` },
    input: { type: 'object', additionalProperties: true, description: "Forwarded verbatim to the worker; must satisfy the kind's input schema." },
    confidentiality: { enum: [...TIERS], default: 'open' },
    class: { enum: [...JOB_CLASSES], default: 'standard' },
    webhook: {
      type: 'string',
      format: 'uri',
      // http passes the schema only for the SSRF guard to refuse it (400 invalid_url), except on a
      // dev-local port under `npm run dev --allow-local`.
      pattern: '^https?://',
      maxLength: 2048,
      description: 'HTTPS URL POSTed a signed job object when the job ends (and when it starts, streams output or logs lines, if `webhook_events_filter` asks); see docs/webhooks.md.',
    },
    webhook_events_filter: {
      type: 'array',
      items: { enum: [...WEBHOOK_EVENTS] },
      minItems: 1,
      uniqueItems: true,
      description: 'Which moments reach `webhook`: `start`, `output` and `logs` (at most one delivery per run every 500 ms each, carrying everything since the last), `completed`. Default `["completed"]`; needs `webhook`.',
    },
    ...deadlineFields,
    ...attemptFields,
  },
  dependentRequired: { webhook_events_filter: ['webhook'] },
} as const;

export const jobAccepted = {
  type: 'object',
  required: ['run_id', 'kind', 'status', 'confidentiality', 'class', 'priority', 'created_at', 'warnings'],
  properties: {
    run_id: { type: 'string', pattern: '^run_[0-9A-Z]{26}$' },
    kind: kindName,
    status: { const: 'queued' },
    confidentiality,
    class: jobClass,
    priority: { type: 'integer', minimum: 1, description: 'Scheduler priority, 1 = most urgent.' },
    created_at: isoTime,
    warnings: {
      type: 'array',
      description: "Input fields neither the kind's schema nor its model's names, accepted and forwarded (docs/models.md).",
      items: { type: 'object', required: ['path', 'message'], properties: { path: { type: 'string' }, message: { type: 'string' } } },
    },
  },
} as const;

const { warnings: _acceptedOnly, ...jobProperties } = jobAccepted.properties;

export const job = {
  type: 'object',
  required: ['run_id', 'kind', 'status', 'terminal', 'confidentiality', 'class', 'priority', 'created_at'],
  properties: {
    ...jobProperties,
    status: runStatus,
    terminal: { type: 'boolean' },
    started_at: nullable(isoTime),
    finished_at: nullable(isoTime),
    progress: nullable({ type: 'number', minimum: 0, maximum: 1 }),
    attempts: { type: 'integer', minimum: 0 },
    ...deadlineViewFields, ...costViewFields,
    ...attemptViewFields,
    queue_position: nullable({ type: 'integer', minimum: 1, description: '1 = next to be leased; null unless queued.' }),
    waiting_reason: nullable({
      enum: ['no_worker_for_kind', 'no_worker_for_model', 'no_worker_for_rank', 'backend_unavailable', 'retry_backoff', 'concurrency_limit'],
      description:
        'Why a queued run is not leased: no live worker of its tier or a stronger one serves its kind (`no_worker_for_kind`) or its model (`no_worker_for_model`); its model is served in ranks and some rank has no worker the placement rule allows (`no_worker_for_rank`, those ranks in `waiting_ranks`); every one that does reports its backend down (`backend_unavailable`); or an attempt failed and the retry waits out its backoff (`retry_backoff`); or its account, API key or kind has as many runs running as its `max_running` allows (`concurrency_limit`). Null otherwise.',
    }),
    waiting_ranks: waitingRanks,
    output: nullable({
      type: 'object',
      required: ['urls', 'files'],
      properties: OUTPUT_COMMON_PROPERTIES,
      description: "Set when the run succeeded. The kind's other fields: `output_schema` in /v1/capabilities, `components.schemas[\"output.<kind>\"]` here.",
    }),
    error: nullable(runError),
    attestation: nullable({ ...jobAttestation, description: 'A private run that succeeded: its evidence and receipt (docs/confidentiality.md). Null otherwise.' }),
    batch_id: nullable({ type: 'string', pattern: '^batch_[0-9A-Z]{26}$', description: 'The batch it was submitted in (POST /v1/jobs/batch); null: submitted alone.' }),
    attempt_history: attemptHistory,
  },
} as const;

export const listJobsQuery = {
  type: 'object',
  additionalProperties: false,
  properties: {
    status: runStatus,
    kind: { type: 'string', maxLength: 100 },
    batch_id: { type: 'string', maxLength: 40, description: "Only the jobs of this batch (one of the account's)." },
    limit: { type: 'string', pattern: '^[0-9]{1,3}$', description: '1 to 100, default 20' },
    cursor: { type: 'string', maxLength: 200 },
  },
} as const;

export const jobList = {
  type: 'object',
  required: ['data', 'next_cursor'],
  properties: { data: { type: 'array', items: job }, next_cursor: nullable({ type: 'string', description: 'Pass it back as `cursor`; null only when no older job matches (a page may hold fewer than `limit` jobs, even none, with more to come).' }) },
} as const;

export const webhookAttemptList = {
  type: 'object',
  required: ['data'],
  properties: {
    data: {
      type: 'array',
      description: 'Delivery attempts, oldest first.',
      items: {
        type: 'object',
        required: ['webhook_id', 'event', 'url', 'attempt', 'at', 'status_code', 'error', 'duration_ms', 'outcome', 'next_attempt_at'],
        properties: {
          webhook_id: { type: 'string', description: 'The `webhook-id` header: the same on every attempt of one event.' },
          event: { enum: [...WEBHOOK_EVENTS] },
          url: { type: 'string' },
          attempt: { type: 'integer', minimum: 1 },
          at: isoTime,
          status_code: nullable({ type: 'integer', description: 'The receiver\'s answer; null when none came.' }),
          error: nullable({ type: 'string', description: 'Why no answer came: timeout, connect_failed, tls_failed, url_blocked, ...' }),
          duration_ms: { type: 'integer', minimum: 0 },
          outcome: {
            enum: ['delivered', 'failed', 'retrying', 'gave_up'],
            description: 'delivered: 2xx; retrying: failed, retried at next_attempt_at; gave_up: failed, last attempt; failed: 410 Gone, no retry.',
          },
          next_attempt_at: nullable(isoTime),
        },
      },
    },
  },
} as const;

export const webhookSecret = {
  type: 'object',
  required: ['secret', 'created_at'],
  properties: {
    secret: { type: 'string', pattern: '^whsec_', description: 'Standard Webhooks signing secret: `whsec_` and base64 key bytes.' },
    created_at: isoTime,
  },
} as const;

export const account = {
  type: 'object',
  required: ['id', 'name', 'credits', 'reserved'],
  properties: {
    id: { type: 'string' },
    name: { type: 'string' },
    credits: { type: 'integer', description: 'What the account can still spend, reservations already taken off.' },
    reserved: { type: 'integer', description: 'Held by runs in flight.' },
    created_at: isoTime, budget: accountBudget,
  },
} as const;

export const createKeyBody = {
  type: 'object',
  additionalProperties: false,
  properties: { name: { type: 'string', minLength: 1, maxLength: 100 } },
} as const;

export const apiKey = {
  type: 'object',
  required: ['id', 'prefix', 'created_at'],
  properties: {
    id: { type: 'string' },
    prefix: { type: 'string' },
    name: nullable({ type: 'string' }),
    created_at: isoTime,
    revoked_at: nullable(isoTime),
  },
} as const;

export const createdKey = {
  type: 'object',
  required: ['id', 'key', 'prefix', 'created_at'],
  properties: { ...apiKey.properties, key: { type: 'string', description: 'Shown once; only its hash is stored.' } },
} as const;

export const keyList = { type: 'object', required: ['data'], properties: { data: { type: 'array', items: apiKey } } } as const;

export const workerTokenCreated = {
  type: 'object',
  required: ['id', 'worker_token', 'trust', 'created_at'],
  properties: { id: { type: 'string' }, worker_token: { type: 'string' }, trust: { enum: ['open', 'trusted'] }, created_at: isoTime },
} as const;

export const adminCreateAccountBody = {
  type: 'object',
  additionalProperties: false,
  required: ['name'],
  properties: { name: { type: 'string', minLength: 1, maxLength: 200 }, credits: { type: 'integer', minimum: 0, maximum: 1e15 } },
} as const;

export const adminAccountCreated = {
  type: 'object',
  required: ['account', 'api_key'],
  properties: { account, api_key: { type: 'string' } },
} as const;

export const adminCreditsBody = {
  type: 'object',
  additionalProperties: false,
  required: ['delta'],
  properties: { delta: { type: 'integer', minimum: -1e15, maximum: 1e15, not: { const: 0 } } },
} as const;

export const adminCreditsResult = { type: 'object', required: ['account'], properties: { account } } as const;

export const operator = {
  type: 'object',
  required: ['id', 'name', 'trust', 'created_at'],
  properties: { id: { type: 'string' }, name: { type: 'string' }, trust: { enum: ['open', 'trusted'] }, created_at: isoTime },
} as const;

export const adminCreateOperatorBody = {
  type: 'object',
  additionalProperties: false,
  required: ['name', 'trust'],
  properties: { name: { type: 'string', minLength: 1, maxLength: 200 }, trust: { enum: ['open', 'trusted'] } },
} as const;

export const operatorList = { type: 'object', required: ['data'], properties: { data: { type: 'array', items: operator } } } as const;

export const adminTrustBody = {
  type: 'object',
  additionalProperties: false,
  required: ['trust'],
  properties: { trust: { enum: ['open', 'trusted'], description: '`trusted` after vetting; `open` revokes it and disconnects its trusted workers at once.' } },
} as const;

export const adminOperatorCreated = {
  type: 'object',
  required: ['operator', 'worker_token'],
  properties: { operator, worker_token: { type: 'string', description: 'Shown once.' } },
} as const;

export const health = { type: 'object', required: ['status'], properties: { status: { type: 'string' } } } as const;

const byTier = {
  type: 'object',
  required: ['open', 'trusted', 'private'],
  properties: { open: { type: 'integer' }, trusted: { type: 'integer' }, private: { type: 'integer' } },
} as const;

export const capabilities = {
  type: 'object',
  required: ['kinds'],
  properties: {
    kinds: {
      type: 'array',
      items: {
        type: 'object',
        required: ['kind', 'rollout', 'workers', 'workers_by_tier', 'workers_unavailable', 'input_schema', 'output_artifacts', 'output_schema', 'models'],
        properties: {
          kind: kindName,
          rollout: { enum: ['live', 'rolling_out'] },
          description: { type: 'string' }, price: kindPrice,
          workers: { type: 'integer', description: 'Workers connected now that serve this kind, on any gateway instance.' },
          workers_by_tier: byTier,
          workers_unavailable: { type: 'integer', description: 'Of `workers`, those whose backend (inference server) does not answer: connected, but offered no lease until it answers again (docs/worker-protocol.md, `backend`).' },
          input_schema: { type: 'object', additionalProperties: true, description: 'JSON Schema (2020-12) that `input` must satisfy.' },
          output_artifacts: {
            type: 'array',
            description: 'The files a succeeded run produces, named as the reference engine names them.',
            items: {
              type: 'object',
              required: ['name', 'content_type', 'description', 'always'],
              properties: {
                name: { type: 'string' },
                content_type: { type: 'string' },
                description: { type: 'string' },
                always: { type: 'boolean', description: 'Whether every succeeded run of the kind has it.' },
              },
            },
          },
          output_schema: { type: 'object', additionalProperties: true, description: "JSON Schema (2020-12) of a succeeded run's `output`." },
          models: {
            type: 'array',
            description: "The kind's models of the catalogue (docs/models.md), served now or not.",
            items: {
              type: 'object',
              required: ['id', 'description', 'workers', 'workers_by_tier', 'workers_unavailable', 'input_schema', 'ranks', 'middle_ranks', 'ranks_available', 'pipelines'],
              properties: {
                id: { type: 'string' },
                description: nullable({ type: 'string' }),
                workers: { type: 'integer', description: 'Workers connected now that serve this model (a ranked model: any of its ranks).' },
                workers_by_tier: byTier,
                workers_unavailable: { type: 'integer', description: 'Of `workers`, those whose backend does not answer.' },
                input_schema: nullable({ type: 'object', additionalProperties: true, description: "JSON Schema (2020-12) extending the kind's, or null." }),
                ...rankFields,
              },
            },
          },
        },
      },
    },
  },
} as const;

export const capacity = {
  type: 'object',
  required: ['workers', 'slots', 'jobs', 'by_kind', 'updated_at'],
  properties: {
    workers: {
      type: 'object',
      required: ['total', 'by_tier', 'unavailable'],
      properties: {
        total: { type: 'integer', description: 'Workers connected now, on any gateway instance; each counted once, even while it registers again after losing its gateway.' },
        by_tier: byTier,
        unavailable: { type: 'integer', description: 'Of `total`, those whose backend does not answer: connected, offered no lease.' },
      },
    },
    slots: {
      type: 'object',
      required: ['total', 'busy', 'free', 'unavailable'],
      properties: {
        total: { type: 'integer' },
        busy: { type: 'integer' },
        free: { type: 'integer', description: 'Slots that could take a job now: not busy, on workers whose backend answers.' },
        unavailable: { type: 'integer', description: 'Slots neither busy nor free: those of workers whose backend does not answer.' },
      },
    },
    jobs: { type: 'object', required: ['queued', 'running'], properties: { queued: { type: 'integer' }, running: { type: 'integer' } } },
    by_kind: {
      type: 'array',
      items: {
        type: 'object',
        required: ['kind', 'workers', 'workers_unavailable', 'slots_free', 'queued', 'models'],
        properties: {
          kind: kindName,
          workers: { type: 'integer' },
          workers_unavailable: { type: 'integer', description: 'Of `workers`, those whose backend does not answer.' },
          slots_free: { type: 'integer', description: 'Free slots of the workers serving it whose backend answers.' },
          queued: { type: 'integer', description: "The kind's queued jobs, its models' included." },
          models: {
            type: 'array',
            items: {
              type: 'object',
              required: ['id', 'workers', 'workers_unavailable', 'slots_free', 'queued'],
              properties: {
                id: { type: 'string' },
                workers: { type: 'integer' },
                workers_unavailable: { type: 'integer' },
                slots_free: { type: 'integer', description: "Free slots of the workers serving it, within each one's max_concurrency." },
                queued: { type: 'integer' },
              },
            },
          },
        },
      },
    },
    updated_at: isoTime,
  },
} as const;
