import type { Middleware } from 'koa';
import type { Logger } from 'pino';
import type { RequestState } from '../context.js';

/** Probed or scraped every few seconds: a line each would bury the requests that matter. */
const UNLOGGED = new Set(['/healthz', '/readyz', '/metrics']);

/**
 * One JSON line per request once its response is over (for SSE, when the stream ends):
 * method, the route's template (never the raw path, which may hold an artifact capability or
 * an id), status, duration, request id and the account when known. Mounted after `requestId`
 * and outside the error handler, so it logs the status actually sent.
 */
export function accessLog(log: Logger): Middleware<RequestState> {
  // The line is at info: below that level the listener and the line's fields would be built
  // for nothing on every request (the submit benchmark runs at warn).
  if (!log.isLevelEnabled('info')) return (_ctx, next) => next();
  return async (ctx, next) => {
    if (UNLOGGED.has(ctx.path)) return next();
    const started = performance.now();
    const res = ctx.res;
    res.once('close', () => {
      const route = (ctx as { _matchedRoute?: unknown })._matchedRoute;
      log.info(
        {
          requestId: ctx.state.requestId,
          method: ctx.method,
          route: typeof route === 'string' ? route : null,
          status: res.statusCode,
          durationMs: Math.round(performance.now() - started),
          accountId: ctx.state.principal?.accountId ?? null,
          // The client left before the whole answer was sent.
          ...(res.writableFinished ? {} : { aborted: true }),
        },
        'request',
      );
    });
    await next();
  };
}
