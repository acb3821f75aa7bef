import { bearerToken } from '../../services/auth/bearer.js';
import { createHash, timingSafeEqual } from 'node:crypto';
import { UnauthorizedError } from '../../../models/errors.js';
import type { Ctx } from '../context.js';
import type { RouteSpec } from '../route-spec.js';
import type { GatewayMetrics } from '../../services/metrics/gateway-metrics.js';

const digest = (s: string) => createHash('sha256').update(s).digest();

/** With METRICS_TOKEN set, the scrape must present it as a bearer; unset, /metrics is open. */
function metricsGuard(token: string | undefined): (ctx: Ctx) => void {
  // Compared as digests: equal lengths for timingSafeEqual, and no timing hint of the length.
  const expected = token ? digest(token) : null;
  return (ctx) => {
    if (!expected) return;
    const presented = bearerToken(ctx.get('Authorization'));
    if (!presented || !timingSafeEqual(digest(presented), expected)) {
      throw new UnauthorizedError('a valid metrics token is required: Authorization: Bearer <METRICS_TOKEN>');
    }
  };
}

export interface MetricsRoutesOptions {
  metrics: Pick<GatewayMetrics, 'exposition' | 'contentType'>;
  /** METRICS_TOKEN: the bearer a scrape must present; unset, /metrics is open. */
  token: string | undefined;
}

/** `GET /metrics`: the Prometheus scrape (docs/api.md, "Operators' surfaces"); outside /v1, no API key. */
export function metricsRoutes({ metrics, token }: MetricsRoutesOptions): RouteSpec[] {
  const guard = metricsGuard(token);
  return [
    {
      method: 'get',
      path: '/metrics',
      operationId: 'getMetrics',
      summary: 'Prometheus metrics of this instance (text exposition); with METRICS_TOKEN set, send it as a bearer',
      tag: 'operators',
      auth: 'none',
      responses: {
        200: { description: 'Prometheus text exposition format 0.0.4 (docs/operations.md, "Metrics")', mediaType: 'text/plain', schema: { type: 'string' } },
        401: { description: 'METRICS_TOKEN is set and the bearer is missing or wrong' },
        503: { description: 'Metrics are not collected by this process' },
      },
      async handler(ctx) {
        guard(ctx);
        const text = await metrics.exposition();
        ctx.type = metrics.contentType;
        ctx.body = text;
      },
    },
  ];
}
