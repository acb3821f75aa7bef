import type { Middleware } from 'koa';
import type { RequestState } from '../context.js';
import type { GatewayMetrics } from '../../services/metrics/gateway-metrics.js';
import { UNMATCHED_ROUTE } from '../../services/metrics/metric-labels.js';

/** The RouteSpec path of a Koa router path: `/v1/jobs/:run_id` -> `/v1/jobs/{run_id}` (koaPath reversed). */
const templateOf = (koaPath: string) => koaPath.replace(/:([a-z_]+)/g, '{$1}');

/**
 * Times every HTTP request into `switchyard_http_request_duration_seconds`. Mounted outside
 * the error handler, so it sees the status actually sent. The route label is the template of
 * the route that answered (the router records it as `_matchedRoute`), or `unmatched`: a
 * request id or a guessed path never becomes a label value. Streaming routes (SSE) are timed
 * until their stream is set up, not while it stays open.
 */
export function httpMetrics(metrics: Pick<GatewayMetrics, 'observeRequest'>): Middleware<RequestState> {
  return async (ctx, next) => {
    const started = performance.now();
    try {
      await next();
    } finally {
      const matched = (ctx as { _matchedRoute?: string | RegExp })._matchedRoute;
      const route = typeof matched === 'string' ? templateOf(matched) : UNMATCHED_ROUTE;
      metrics.observeRequest(ctx.method, route, ctx.status, (performance.now() - started) / 1000);
    }
  };
}
