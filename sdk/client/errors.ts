import type { JobResult, JsonObject } from './types.js';

/** The error codes of docs/api.md "Conventions"; a newer gateway may send others. */
export type SwitchyardErrorCode =
  | 'invalid_request'
  | 'unknown_kind'
  | 'unknown_model'
  | 'invalid_schema'
  | 'invalid_url'
  | 'url_blocked'
  | 'unknown_tool'
  | 'unauthorized'
  | 'insufficient_credits'
  | 'budget_exceeded'
  | 'forbidden'
  | 'not_found'
  | 'model_not_found'
  | 'method_not_allowed'
  | 'conflict'
  | 'name_conflict'
  | 'idempotency_conflict'
  | 'already_terminal'
  | 'quota_exceeded'
  | 'payload_too_large'
  | 'unsupported_media_type'
  | 'max_steps'
  | 'range_not_satisfiable'
  | 'rate_limited'
  | 'headers_too_large'
  | 'internal'
  | 'unavailable'
  /** The answer was not the JSON the contract promises (a proxy's HTML page, say). */
  | 'invalid_response'
  | (string & {});

/** Base of every error the client library throws (a caller's own abort stays an AbortError). */
export class SwitchyardError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'SwitchyardError';
  }
}

export interface ApiErrorInit {
  status: number;
  code: SwitchyardErrorCode;
  message: string;
  details?: JsonObject;
  requestId?: string;
  /** The parsed response body (the `{error: {...}}` envelope), or its text when not JSON. */
  body: unknown;
  /** Seconds from Retry-After, when the gateway sent it. */
  retryAfter?: number;
}

/** The gateway answered with an error status. */
export class SwitchyardApiError extends SwitchyardError {
  readonly status: number;
  readonly code: SwitchyardErrorCode;
  readonly details?: JsonObject;
  readonly requestId?: string;
  readonly body: unknown;
  readonly retryAfter?: number;

  constructor(init: ApiErrorInit) {
    super(init.message);
    this.name = 'SwitchyardApiError';
    this.status = init.status;
    this.code = init.code;
    this.details = init.details;
    this.requestId = init.requestId;
    this.body = init.body;
    this.retryAfter = init.retryAfter;
  }

  /** 5xx, 429 and network-level trouble are worth retrying; the others are not. */
  get retryable(): boolean {
    return this.status >= 500 || this.status === 429;
  }
}

/** 400: invalid_request (ajv errors in `details`), unknown_kind, invalid_schema, invalid_url, url_blocked, unknown_tool. */
export class SwitchyardBadRequestError extends SwitchyardApiError {
  override name = 'SwitchyardBadRequestError';
}

/** 401: missing, unknown or revoked key. */
export class SwitchyardAuthenticationError extends SwitchyardApiError {
  override name = 'SwitchyardAuthenticationError';
}

/** 402: the balance is short of the kind's price. */
export class SwitchyardInsufficientCreditsError extends SwitchyardApiError {
  override name = 'SwitchyardInsufficientCreditsError';
}

/** 404: no such resource for this account (another account's answers 404 too). */
export class SwitchyardNotFoundError extends SwitchyardApiError {
  override name = 'SwitchyardNotFoundError';
}

/** 409: already_terminal, idempotency_conflict, name_conflict, conflict. */
export class SwitchyardConflictError extends SwitchyardApiError {
  override name = 'SwitchyardConflictError';
}

/** 429: see `retryAfter`. */
export class SwitchyardRateLimitError extends SwitchyardApiError {
  override name = 'SwitchyardRateLimitError';
}

const BY_STATUS: Record<number, new (init: ApiErrorInit) => SwitchyardApiError> = {
  400: SwitchyardBadRequestError,
  401: SwitchyardAuthenticationError,
  402: SwitchyardInsufficientCreditsError,
  404: SwitchyardNotFoundError,
  409: SwitchyardConflictError,
  429: SwitchyardRateLimitError,
};

/** The typed error of an error answer, from its status, parsed body (or text) and headers. */
export function apiErrorFrom(status: number, body: unknown, headers: Headers): SwitchyardApiError {
  const envelope = (body as { error?: { code?: unknown; message?: unknown; details?: unknown } } | null)?.error;
  const requestId = headers.get('x-request-id') ?? undefined;
  const retryAfterHeader = headers.get('retry-after');
  const retryAfter = retryAfterHeader !== null && /^\d+$/.test(retryAfterHeader.trim()) ? Number(retryAfterHeader) : undefined;
  const init: ApiErrorInit =
    envelope && typeof envelope.code === 'string'
      ? {
          status,
          code: envelope.code,
          message: typeof envelope.message === 'string' ? envelope.message : envelope.code,
          details: envelope.details && typeof envelope.details === 'object' ? (envelope.details as JsonObject) : undefined,
          requestId,
          body,
          retryAfter,
        }
      : { status, code: 'invalid_response', message: `HTTP ${status} without a Switchyard error body`, requestId, body, retryAfter };
  const Class = BY_STATUS[status] ?? SwitchyardApiError;
  return new Class(init);
}

/** The request never got a complete answer: DNS, refused or reset connection, cut body. */
export class SwitchyardNetworkError extends SwitchyardError {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'SwitchyardNetworkError';
  }
}

/** An event stream that kept failing after its reconnects; resume with `lastEventId`. */
export class SwitchyardStreamError extends SwitchyardNetworkError {
  readonly runId: string;
  readonly lastEventId: number | undefined;

  constructor(message: string, init: { runId: string; lastEventId: number | undefined; cause?: unknown }) {
    super(message, { cause: init.cause });
    this.name = 'SwitchyardStreamError';
    this.runId = init.runId;
    this.lastEventId = init.lastEventId;
  }
}

/** A request, or a wait() as a whole, ran past its timeout. */
export class SwitchyardTimeoutError extends SwitchyardError {
  readonly timeoutMs: number;
  /** Set by wait(): the run it was waiting for, which keeps running. */
  readonly runId?: string;
  /** Set by wait(): the last state it saw of the run, if any. */
  readonly lastJob?: JobResult;

  constructor(message: string, init: { timeoutMs: number; runId?: string; lastJob?: JobResult; cause?: unknown }) {
    super(message, { cause: init.cause });
    this.name = 'SwitchyardTimeoutError';
    this.timeoutMs = init.timeoutMs;
    this.runId = init.runId;
    this.lastJob = init.lastJob;
  }
}
