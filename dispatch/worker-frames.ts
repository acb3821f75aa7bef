import { compile, fieldErrors } from '../models/validation.js';
import { KIND_NAMES, TIERS } from '../models/kinds.js';
import {
  MAX_ERROR_MESSAGE,
  MAX_HEARTBEAT_LEASES,
  MAX_LOG_LINE,
  MAX_MODEL_DESCRIPTION,
  MAX_WORKER_MODELS,
  MODEL_ID_PATTERN,
  MAX_OUTPUT_DELTA,
  MAX_PROGRESS_MESSAGE,
  MAX_BACKEND_MESSAGE,
  MAX_RANKS,
  WORKER_IDENTITY_PATTERN,
  BACKEND_STATE_PROTOCOL,
  IDENTITY_PROTOCOL,
  MODELS_PROTOCOL,
  RANKS_PROTOCOL,
  type RegisterFrame,
  type WorkerFrame,
  type WorkerModels,
} from '../sdk/protocol/index.js';

/**
 * The gateway's side of the frames a worker sends: the frame types are shared with the SDK
 * (sdk/protocol/), but what arrives is untrusted, so each frame is checked here against a
 * JSON Schema before anything reads it.
 */

const leaseRef = {
  lease_id: { type: 'string', pattern: '^lse_[A-Za-z0-9]{1,64}$' },
  fence: { type: 'integer', minimum: 1 },
} as const;

/**
 * Protocol 3: the models a worker serves, by kind. The shape is checked here; that each kind is
 * one of the worker's and each schema extends its kind's is checked at registration
 * (`checkWorkerModels`), which can name the kind.
 */
const workerModels = {
  type: 'object',
  maxProperties: 64,
  propertyNames: { enum: [...KIND_NAMES] },
  additionalProperties: {
    type: 'array',
    maxItems: MAX_WORKER_MODELS,
    items: {
      type: 'object',
      additionalProperties: false,
      required: ['id'],
      properties: {
        id: { type: 'string', pattern: MODEL_ID_PATTERN },
        description: { type: 'string', maxLength: MAX_MODEL_DESCRIPTION },
        input_schema: { type: 'object' },
        max_concurrency: { type: 'integer', minimum: 1, maximum: 64 },
        // Protocol 6: one pipeline stage of the model. That index < count is checked with the kinds (`checkWorkerModels`).
        rank: {
          type: 'object',
          additionalProperties: false,
          required: ['index', 'count'],
          properties: { index: { type: 'integer', minimum: 0, maximum: MAX_RANKS - 1 }, count: { type: 'integer', minimum: 2, maximum: MAX_RANKS } },
        },
      },
    },
  },
} as const;

const frameSchemas = {
  register: {
    type: 'object',
    additionalProperties: false,
    required: ['type', 'protocol', 'kinds', 'tier', 'slots'],
    properties: {
      type: { const: 'register' },
      protocol: { type: 'array', minItems: 1, maxItems: 16, items: { type: 'integer', minimum: 1 } },
      kinds: { type: 'array', minItems: 1, maxItems: 64, uniqueItems: true, items: { enum: ['all', ...KIND_NAMES] } },
      tier: { enum: [...TIERS] },
      slots: { type: 'integer', minimum: 1, maximum: 64 },
      hardware: { type: 'object', maxProperties: 32 },
      software: { type: 'object', maxProperties: 32 },
      attestation: { type: 'object' },
      // Private tier: the worker's receipt signing key (EC P-384 public JWK), bound by its evidence.
      receipt_key: {
        type: 'object',
        required: ['kty', 'crv', 'x', 'y'],
        maxProperties: 16,
        properties: { kty: { const: 'EC' }, crv: { const: 'P-384' }, x: { type: 'string', maxLength: 128 }, y: { type: 'string', maxLength: 128 } },
        // The private half never leaves the worker.
        not: { required: ['d'] },
      },
      models: workerModels,
      // Protocol 5: the worker's name for itself across its reconnections.
      identity: { type: 'string', pattern: WORKER_IDENTITY_PATTERN },
      // Protocol 2: leases the worker still runs after a `reconnect`, proven by their upload tokens.
      resume: {
        type: 'array',
        maxItems: 64,
        items: {
          type: 'object',
          additionalProperties: false,
          required: ['lease_id', 'fence', 'upload_token'],
          properties: { ...leaseRef, upload_token: { type: 'string', minLength: 1, maxLength: 200 } },
        },
      },
    },
  },
  // Private tier: evidence answering the gateway's latest `attest` nonce (docs/worker-protocol.md).
  attestation: {
    type: 'object',
    additionalProperties: false,
    required: ['type', 'evidence'],
    properties: {
      type: { const: 'attestation' },
      // The nonce it answers (optional for older workers): a late answer to a nonce the gateway
      // has since replaced is then ignored instead of spending the new one.
      nonce: { type: 'string', minLength: 1, maxLength: 100 },
      evidence: {
        type: 'object',
        additionalProperties: false,
        required: ['token', 'gpus'],
        properties: {
          token: { type: 'string', minLength: 1, maxLength: 65_536 },
          gpus: { type: 'object', minProperties: 1, maxProperties: 16, additionalProperties: { type: 'string', maxLength: 65_536 } },
        },
      },
    },
  },
  models: {
    type: 'object',
    additionalProperties: false,
    required: ['type', 'models'],
    properties: { type: { const: 'models' }, models: workerModels },
  },
  // Protocol 5: the worker's backend went down (no leases for it) or answers again.
  backend: {
    type: 'object',
    additionalProperties: false,
    required: ['type', 'available'],
    properties: { type: { const: 'backend' }, available: { type: 'boolean' }, message: { type: 'string', maxLength: MAX_BACKEND_MESSAGE } },
  },
  heartbeat: {
    type: 'object',
    additionalProperties: false,
    required: ['type'],
    properties: { type: { const: 'heartbeat' }, leases: { type: 'array', maxItems: MAX_HEARTBEAT_LEASES, items: { type: 'string', maxLength: 80 } } },
  },
  progress: {
    type: 'object',
    additionalProperties: false,
    required: ['type', 'lease_id', 'fence', 'progress'],
    properties: { type: { const: 'progress' }, ...leaseRef, progress: { type: 'number', minimum: 0, maximum: 1 }, message: { type: 'string', maxLength: MAX_PROGRESS_MESSAGE } },
  },
  log: {
    type: 'object',
    additionalProperties: false,
    required: ['type', 'lease_id', 'fence', 'line'],
    properties: { type: { const: 'log' }, ...leaseRef, line: { type: 'string', maxLength: MAX_LOG_LINE } },
  },
  output: {
    type: 'object',
    additionalProperties: false,
    required: ['type', 'lease_id', 'fence', 'delta'],
    properties: { type: { const: 'output' }, ...leaseRef, delta: { type: 'string', maxLength: MAX_OUTPUT_DELTA }, seq: { type: 'integer', minimum: 1, maximum: Number.MAX_SAFE_INTEGER } },
  },
  complete: {
    type: 'object',
    additionalProperties: false,
    required: ['type', 'lease_id', 'fence', 'output'],
    properties: {
      type: { const: 'complete' },
      ...leaseRef,
      output: {
        type: 'object',
        required: ['urls'],
        properties: { urls: { type: 'array', maxItems: 256, items: { type: 'string', pattern: '^https?://', maxLength: 4096 } } },
      },
      // Private runs: the worker's signed receipt (a compact JWS) over the run, input and artifacts.
      receipt: { type: 'string', minLength: 1, maxLength: 65_536 },
      // Protocol 7: what the run used, charged at its kind's per-unit price (models/pricing.ts).
      usage: {
        type: 'object',
        additionalProperties: false,
        properties: {
          input_tokens: { type: 'integer', minimum: 0, maximum: Number.MAX_SAFE_INTEGER },
          output_tokens: { type: 'integer', minimum: 0, maximum: Number.MAX_SAFE_INTEGER },
          seconds: { type: 'number', minimum: 0, maximum: 1e9 },
          images: { type: 'integer', minimum: 0, maximum: 1e9 },
        },
      },
    },
  },
  fail: {
    type: 'object',
    additionalProperties: false,
    required: ['type', 'lease_id', 'fence', 'error'],
    properties: {
      type: { const: 'fail' },
      ...leaseRef,
      error: {
        type: 'object',
        additionalProperties: false,
        required: ['code', 'message', 'retryable'],
        properties: { code: { type: 'string', pattern: '^[a-z][a-z0-9_]{0,63}$' }, message: { type: 'string', maxLength: MAX_ERROR_MESSAGE }, retryable: { type: 'boolean' } },
      },
    },
  },
  // Every frame type of the shared contract has its schema here, and no other type does.
} as const satisfies Record<WorkerFrame['type'], object>;

export type FrameType = keyof typeof frameSchemas;

export class FrameError extends Error {
  constructor(readonly code: 'bad_frame' | 'unknown_type', message: string, readonly details?: unknown) {
    super(message);
  }
}

/** Parses and validates one text frame; throws `FrameError` for anything a worker should be told about. */
export function parseFrame(text: string): WorkerFrame {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new FrameError('bad_frame', 'a frame must be one JSON object');
  }
  const type = (value as { type?: unknown } | null)?.type;
  if (typeof type !== 'string' || !(type in frameSchemas)) {
    throw new FrameError('unknown_type', `unknown frame type ${JSON.stringify(type ?? null).slice(0, 60)}`);
  }
  const validate = compile(frameSchemas[type as FrameType]);
  if (!validate(value)) {
    const errors = fieldErrors(validate.errors);
    throw new FrameError('bad_frame', `invalid ${type} frame: ${errors[0].path} ${errors[0].message}`, errors);
  }
  return value as WorkerFrame;
}

/** Frame types newer than protocol 1, with the version that brought each. */
const FRAME_SINCE: Partial<Record<WorkerFrame['type'], number>> = { models: MODELS_PROTOCOL, backend: BACKEND_STATE_PROTOCOL };
/** Register fields newer than protocol 1 (besides `resume`, which an older worker just never sends). */
const REGISTER_FIELD_SINCE = { models: MODELS_PROTOCOL, identity: IDENTITY_PROTOCOL } as const;

/** Why a frame of `type` cannot be taken on a connection that agreed on `version`, or null. */
export function frameTooNew(type: WorkerFrame['type'], version: number): string | null {
  const since = FRAME_SINCE[type];
  return since !== undefined && version < since ? `the ${type} frame needs protocol ${since}; this connection agreed on ${version}` : null;
}

/** Why a register that agrees on `version` cannot carry one of its fields, or null. */
export function registerFieldTooNew(frame: RegisterFrame, version: number): string | null {
  for (const [field, since] of Object.entries(REGISTER_FIELD_SINCE)) {
    if (frame[field as keyof typeof REGISTER_FIELD_SINCE] !== undefined && version < since) return `${field} needs protocol ${since}; offer it in protocol, or leave ${field} out`;
  }
  return frame.models ? modelFieldTooNew(frame.models, version) : null;
}

/**
 * Why a model list (of `register` or a `models` frame) cannot be taken on a connection that
 * agreed on `version`, or null: a model's `rank` needs protocol 6, and a worker of an older
 * version that sends one is refused as for any field its version does not have.
 */
export function modelFieldTooNew(models: WorkerModels, version: number): string | null {
  if (version >= RANKS_PROTOCOL) return null;
  for (const [kind, list] of Object.entries(models)) {
    const ranked = list.find((m) => m.rank !== undefined);
    if (ranked) return `models.${kind}: the rank of ${ranked.id} needs protocol ${RANKS_PROTOCOL}; this connection agreed on ${version}`;
  }
  return null;
}
