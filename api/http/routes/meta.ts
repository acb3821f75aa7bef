import { ApiError } from '../../../models/errors.js';
import type { RouteSpec } from '../route-spec.js';
import * as S from '../../contract/schemas.js';

export interface MetaRoutesOptions {
  /** Checks every backing service; throws when one is unreachable. */
  ready: () => Promise<void>;
  /** The OpenAPI document of every route mounted. */
  openapi: () => unknown;
}

/** Health probes and the API description; no credential needed. */
export function metaRoutes({ ready, openapi }: MetaRoutesOptions): RouteSpec[] {
  return [
    {
      method: 'get',
      path: '/v1/openapi.json',
      operationId: 'getOpenApi',
      summary: 'This document',
      tag: 'meta',
      auth: 'none',
      responses: { 200: { description: 'OpenAPI 3.1 document' } },
      async handler(ctx) {
        ctx.body = openapi();
      },
    },
    {
      method: 'get',
      path: '/healthz',
      operationId: 'healthz',
      summary: 'Liveness: the process answers',
      tag: 'meta',
      auth: 'none',
      responses: { 200: { description: 'Alive', schema: S.health } },
      async handler(ctx) {
        ctx.body = { status: 'ok' };
      },
    },
    {
      method: 'get',
      path: '/readyz',
      operationId: 'readyz',
      summary: 'Readiness: Redis and the store answer',
      tag: 'meta',
      auth: 'none',
      responses: { 200: { description: 'Ready', schema: S.health }, 503: { description: 'A backing service is unreachable' } },
      async handler(ctx) {
        try {
          await ready();
        } catch (err) {
          if (err instanceof ApiError) throw err; // e.g. shutting down: its own message
          throw new ApiError('unavailable', 'not ready: a backing service is unreachable', { cause: err, headers: { 'Retry-After': '1' } });
        }
        ctx.body = { status: 'ready' };
      },
    },
  ];
}
