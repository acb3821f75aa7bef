/**
 * Every error code of the public contract, with its HTTP status. This is the one place
 * that maps codes to statuses; layers below the API throw `SwitchyardError`s by code and
 * the API renders them.
 */
export const ERROR_STATUS = {
  invalid_request: 400,
  unknown_kind: 400,
  invalid_schema: 400,
  invalid_url: 400,
  url_blocked: 400,
  unknown_tool: 400,
  unauthorized: 401,
  insufficient_credits: 402,
  forbidden: 403,
  not_found: 404,
  method_not_allowed: 405,
  conflict: 409,
  name_conflict: 409,
  idempotency_conflict: 409,
  already_terminal: 409,
  payload_too_large: 413,
  unsupported_media_type: 415,
  /** A bot's agent loop used its LLM steps without reaching an answer (docs/bots.md). */
  max_steps: 422,
  rate_limited: 429,
  internal: 500,
  unavailable: 503,
} as const;

export type ErrorCode = keyof typeof ERROR_STATUS;

export class SwitchyardError extends Error {
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
    this.name = 'SwitchyardError';
    this.code = code;
    this.status = ERROR_STATUS[code];
    this.details = opts.details;
    this.headers = opts.headers;
  }
}

export class NotFoundError extends SwitchyardError {
  constructor(what: string) {
    super('not_found', `${what} not found`);
  }
}

export class InsufficientCreditsError extends SwitchyardError {
  constructor(needed: number, available: number) {
    super('insufficient_credits', `this job costs ${needed} credits; the account has ${available}`, {
      details: { needed, available },
    });
  }
}

export class UnauthorizedError extends SwitchyardError {
  constructor(message = 'a valid API key is required') {
    super('unauthorized', message, { headers: { 'WWW-Authenticate': 'Bearer realm="switchyard"' } });
  }
}

export class ValidationError extends SwitchyardError {
  constructor(message: string, errors?: unknown[]) {
    super('invalid_request', message, errors ? { details: { errors } } : {});
  }
}

/** Status returned by the store when a run transition is refused because the run is already terminal. */
export class AlreadyTerminalError extends SwitchyardError {
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
  return /MaxRetriesPerRequest|Connection is closed|ECONNREFUSED|ETIMEDOUT|Command timed out|MongoServerSelection|MongoNetwork|MongoNotConnected|LOADING|READONLY|CLUSTERDOWN/i.test(
    `${err.name} ${err.message}`,
  );
}
