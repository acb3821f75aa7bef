import { STATUS_CODES } from 'node:http';
import type { Middleware } from 'koa';
import type { Logger } from 'pino';
import { ERROR_STATUS, ApiError, toApiError } from '../../../models/errors.js';
import type { RequestState } from '../context.js';
import { lingerBeforeClose } from './lingering-close.js';
import { openAiErrorBody } from '../openai/openai-error.js';
import type { ErrorStyle } from '../route-spec.js';

/** The error envelope of docs/api.md: `{error: {code, message, details?}}`. */
function envelope(err: ApiError): { error: Record<string, unknown> } {
  const error: Record<string, unknown> = { code: err.code, message: err.message };
  if (err.details) error.details = err.details;
  return { error };
}

export function renderError(
  ctx: { status: number; body: unknown; set(field: string, value: string): void; state: RequestState },
  err: ApiError,
  style: ErrorStyle = 'contract',
): void {
  ctx.status = err.status ?? ERROR_STATUS[err.code];
  for (const [name, value] of Object.entries(err.headers ?? {})) ctx.set(name, value);
  ctx.body = style === 'openai' ? openAiErrorBody(err) : envelope(err);
}

/**
 * `err` as a whole HTTP/1.1 answer that closes its connection, for what is answered on the raw
 * socket because no request reached the app (a malformed or oversize request, a refused
 * WebSocket upgrade): the same status, headers and envelope as `renderError` gives.
 */
export function rawErrorAnswer(err: ApiError, headers: Record<string, string> = {}, style: ErrorStyle = 'contract'): string {
  const body = JSON.stringify(style === 'openai' ? openAiErrorBody(err) : envelope(err));
  const fields = Object.entries({ ...err.headers, ...headers }).map(([name, value]) => `${name}: ${value}\r\n`).join('');
  return (
    `HTTP/1.1 ${err.status} ${STATUS_CODES[err.status] ?? ''}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n` +
    `${fields}Connection: close\r\n\r\n${body}`
  );
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
        if (ctx.status === 404) throw new ApiError('not_found', `no route for ${ctx.method} ${ctx.path}`);
        if (ctx.status === 405 || ctx.status === 501) {
          throw new ApiError('method_not_allowed', `${ctx.method} is not allowed on ${ctx.path}`);
        }
      }
    } catch (thrown) {
      const err = toApiError(thrown);
      if (err.status >= 500) {
        log.error({ err: err.cause ?? thrown, requestId: ctx.state.requestId, method: ctx.method, path: ctx.path }, 'request failed');
      }
      // Refused before its body was read (too large, over a quota, a bad upload token): closing the
      // connection keeps the rest from being parsed as a request, lingering lets the caller read why.
      if (err.code === 'payload_too_large' || !ctx.req.complete) {
        ctx.set('Connection', 'close');
        lingerBeforeClose(ctx.req);
      }
      renderError(ctx, err, styleOf(ctx.path));
    }
  };
}
