/**
 * Every error code of the public contract, with its HTTP status. This is the one place
 * that maps codes to statuses; layers below the API throw `ApiError`s by code and
 * the API renders them.
 */
export const ERROR_STATUS = {
  invalid_request: 400,
  unknown_kind: 400,
  /** `input.model` names no model of the kind's catalogue (docs/models.md). */
  unknown_model: 400,
  invalid_schema: 400,
  invalid_url: 400,
  url_blocked: 400,
  unknown_tool: 400,
  unauthorized: 401,
  insufficient_credits: 402,
  /** The account's monthly budget would be passed: spent this month + reserved + this job's reservation (docs/jobs.md, "Cost"). */
  budget_exceeded: 402,
  forbidden: 403,
  not_found: 404,
  /** The OpenAI surface's unknown model, in OpenAI's words (docs/openai.md). */
  model_not_found: 404,
  method_not_allowed: 405,
  conflict: 409,
  name_conflict: 409,
  idempotency_conflict: 409,
  already_terminal: 409,
  /** The account's files would hold more than FILE_QUOTA_BYTES (docs/files.md). */
  quota_exceeded: 409,
  payload_too_large: 413,
  unsupported_media_type: 415,
  /** A `Range` wholly past the end of stored bytes (artifacts, files); the answer's `Content-Range` gives their size. */
  range_not_satisfiable: 416,
  /** A bot's agent loop used its LLM steps without reaching an answer (docs/bots.md). */
  max_steps: 422,
  rate_limited: 429,
  /** The request line and headers passed Node's limit; answered before any route sees the request. */
  headers_too_large: 431,
  internal: 500,
  unavailable: 503,
} as const;

export type ErrorCode = keyof typeof ERROR_STATUS;

/** Marks every ApiError, whichever copy of this module made it (`Symbol.for` is process-wide). */
const API_ERROR = Symbol.for('switchyard.ApiError');

export class ApiError extends Error {
  /**
   * `instanceof ApiError` also holds for an ApiError made by another copy of this module. There
   * can be two: the tests load the sources as CommonJS, and the S3 store, imported lazily, as ES
   * modules with their own copy of this file; a store's 413 was then taken for a foreign error
   * (a 400 "interrupted" upload). Subclasses keep the plain prototype check.
   */
  static override [Symbol.hasInstance](value: unknown): boolean {
    if (Function.prototype[Symbol.hasInstance].call(this, value)) return true;
    return this === ApiError && typeof value === 'object' && value !== null && (value as { [API_ERROR]?: boolean })[API_ERROR] === true;
  }

  readonly code: ErrorCode;
  readonly status: number;
  readonly details?: Record<string, unknown>;
  /** Extra response headers that belong to this error (Retry-After, Allow, WWW-Authenticate). */
  readonly headers?: Record<string, string>;

  constructor(
    code: ErrorCode,
    message: string,
    opts: { details?: Record<string, unknown>; headers?: Record<string, string>; cause?: unknown } = {},
  ) {
    super(message, opts.cause === undefined ? undefined : { cause: opts.cause });
    this.name = 'ApiError';
    Object.defineProperty(this, API_ERROR, { value: true });
    this.code = code;
    this.status = ERROR_STATUS[code];
    this.details = opts.details;
    this.headers = opts.headers;
  }
}

export class NotFoundError extends ApiError {
  constructor(what: string) {
    super('not_found', `${what} not found`);
  }
}

export class InsufficientCreditsError extends ApiError {
  constructor(needed: number, available: number) {
    super('insufficient_credits', `this job costs ${needed} credits; the account has ${available}`, {
      details: { needed, available },
    });
  }
}

/** A submission past the account's monthly budget; `details` says where the account stands. */
export class BudgetExceededError extends ApiError {
  constructor(details: { budget: number; spent: number; reserved: number; period: string; needed: number }) {
    super('budget_exceeded', `this job may cost ${details.needed} credits, past the account's budget of ${details.budget} for ${details.period} (spent ${details.spent}, reserved ${details.reserved})`, { details });
  }

  /** A store's refusal of a submission made at `createdAt` (its month is the period) that would reserve `needed`. */
  static of(refused: { budget: number; spent: number; reserved: number }, createdAt: string, needed: number): BudgetExceededError {
    return new BudgetExceededError({ budget: refused.budget, spent: refused.spent, reserved: refused.reserved, period: createdAt.slice(0, 7), needed });
  }
}

export class UnauthorizedError extends ApiError {
  constructor(message = 'a valid API key is required') {
    super('unauthorized', message, { headers: { 'WWW-Authenticate': 'Bearer realm="switchyard"' } });
  }
}

export class ValidationError extends ApiError {
  constructor(message: string, errors?: unknown[]) {
    super('invalid_request', message, errors ? { details: { errors } } : {});
  }
}

/** A change to a run that has already ended (cancel, a second terminal report). */
export class AlreadyTerminalError extends ApiError {
  constructor(runId: string, status: string) {
    super('already_terminal', `run ${runId} is already ${status}`, { details: { status } });
  }
}

/**
 * True for a datastore that is unreachable or not ready (Redis down or restarting, MongoDB
 * without a primary): the operation may work if tried again shortly. The API answers these
 * 503 `unavailable`; the worker protocol answers `unavailable` naming the lease, and the
 * worker sends the frame again.
 */
export function isDatastoreUnavailable(err: unknown): boolean {
  if (!(err instanceof Error)) return false;
  // A Redis Cluster moving a slot (a failover's promotion, a resharding) can hand a command
  // `MOVED`/`ASK` past ioredis's redirection (an auto-pipelined batch whose replies disagree) or
  // `TRYAGAIN`: the same command works once the client has the new slot map.
  return /MaxRetriesPerRequest|Connection is closed|ECONNREFUSED|ETIMEDOUT|Command timed out|MongoServerSelection|MongoNetwork|MongoNotConnected|LOADING|READONLY|CLUSTERDOWN|TRYAGAIN|\b(MOVED|ASK) \d+ \S+:\d+|ReplicaWaitError/i.test(
    `${err.name} ${err.message}`,
  );
}

const CODE_BY_STATUS: Record<number, ErrorCode> = {
  400: 'invalid_request',
  401: 'unauthorized',
  403: 'forbidden',
  404: 'not_found',
  405: 'method_not_allowed',
  409: 'conflict',
  413: 'payload_too_large',
  415: 'unsupported_media_type',
  429: 'rate_limited',
  503: 'unavailable',
};

const MESSAGE_BY_STATUS: Record<number, string> = {
  400: 'the request body is not valid JSON',
  413: 'the request body is too large',
  415: 'unsupported content type or charset: send application/json in UTF-8',
};

/**
 * The one mapping from anything thrown to an `ApiError`, for every transport (HTTP, SSE and the
 * three sockets): errors of ours pass through, http-errors from body parsers keep their 4xx
 * meaning, a datastore outage is `unavailable` (retry shortly), anything else is `internal`
 * with the original kept as its cause for the log, never shown.
 */
export function toApiError(err: unknown): ApiError {
  if (err instanceof ApiError) return err;
  const e = err instanceof Error ? err : new Error(String(err));
  const status = (e as { status?: number }).status ?? (e as { statusCode?: number }).statusCode;
  // http-errors thrown by koa-body / co-body carry a 4xx status and a safe meaning.
  if (typeof status === 'number' && status >= 400 && status < 500) {
    const code = CODE_BY_STATUS[status] ?? 'invalid_request';
    const message = (e as { expose?: boolean }).expose && status !== 400 ? e.message : MESSAGE_BY_STATUS[status] ?? e.message;
    return new ApiError(code, message);
  }
  // Errors from the datastores mean "try again later", not "we are broken".
  if (isDatastoreUnavailable(e)) return new ApiError('unavailable', 'a backing service is unavailable; retry shortly', { headers: { 'Retry-After': '1' } });
  return new ApiError('internal', 'internal error', { cause: e });
}
