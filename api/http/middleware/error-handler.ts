import type { Middleware } from 'koa';
import type { Logger } from 'pino';
import { ERROR_STATUS, SwitchyardError, isDatastoreUnavailable, type ErrorCode } from '../../../models/errors.js';
import type { RequestState } from '../context.js';
import { lingerBeforeClose } from './lingering-close.js';
import { openAiErrorBody } from '../openai/openai-error.js';
import type { ErrorStyle } from '../route-spec.js';

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

/** Converts anything thrown into a `SwitchyardError`; never exposes internals. */
export function toSwitchyardError(err: unknown): SwitchyardError {
  if (err instanceof SwitchyardError) return err;
  const e = err instanceof Error ? err : new Error(String(err));
  const status = (e as { status?: number }).status ?? (e as { statusCode?: number }).statusCode;
  // http-errors thrown by koa-body / co-body carry a 4xx status and a safe meaning.
  if (typeof status === 'number' && status >= 400 && status < 500) {
    const code = CODE_BY_STATUS[status] ?? 'invalid_request';
    const message = (e as { expose?: boolean }).expose && status !== 400 ? e.message : MESSAGE_BY_STATUS[status] ?? e.message;
    return new SwitchyardError(code, message);
  }
  // Errors from the datastores mean "try again later", not "we are broken".
  if (isDatastoreUnavailable(e)) return new SwitchyardError('unavailable', 'a backing service is unavailable; retry shortly', { headers: { 'Retry-After': '1' } });
  return new SwitchyardError('internal', 'internal error', { cause: e });
}

export function renderError(
  ctx: { status: number; body: unknown; set(field: string, value: string): void; state: RequestState },
  err: SwitchyardError,
  style: ErrorStyle = 'contract',
): void {
  ctx.status = err.status ?? ERROR_STATUS[err.code];
  for (const [name, value] of Object.entries(err.headers ?? {})) ctx.set(name, value);
  const error: Record<string, unknown> = { code: err.code, message: err.message };
  if (err.details) error.details = err.details;
  ctx.body = style === 'openai' ? openAiErrorBody(err) : { error };
}

/**
 * The one place errors become HTTP answers: the error envelope of docs/api.md (or, on the paths of
 * routes with `errorStyle: 'openai'`, OpenAI's), no stack traces.
 */
export function errorHandler(log: Logger, styleOf: (path: string) => ErrorStyle = () => 'contract'): Middleware<RequestState> {
  return async (ctx, next) => {
    try {
      await next();
      if (ctx.body === undefined) {
        // The router's allowedMethods leaves 405 (with Allow) or 501 bodiless; no route leaves 404.
        if (ctx.status === 404) throw new SwitchyardError('not_found', `no route for ${ctx.method} ${ctx.path}`);
        if (ctx.status === 405 || ctx.status === 501) {
          throw new SwitchyardError('method_not_allowed', `${ctx.method} is not allowed on ${ctx.path}`);
        }
      }
    } catch (thrown) {
      const err = toSwitchyardError(thrown);
      if (err.status >= 500) {
        log.error({ err: err.cause ?? thrown, requestId: ctx.state.requestId, method: ctx.method, path: ctx.path }, 'request failed');
      }
      // Body parsers may leave the request half-read; closing the connection keeps it from being misparsed.
      if (err.code === 'payload_too_large') {
        ctx.set('Connection', 'close');
        lingerBeforeClose(ctx.req);
      }
      renderError(ctx, err, styleOf(ctx.path));
    }
  };
}
